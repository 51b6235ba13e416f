"""Certificates made by ``openssl`` at test time, and a MariaDB that requires TLS.

:func:`make_pki` writes, in a directory: a CA, a server certificate it signs for the name
``localhost`` only (so ``127.0.0.1`` is a host-name mismatch under VERIFY_IDENTITY), a client
certificate it signs, and a second, unrelated CA (the "wrong CA"). :func:`tls_options` are the
server settings that serve them with ``require_secure_transport=ON``.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pki", "make_pki", "tls_options"]


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    dir: Path

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")

    @property
    def other_ca(self) -> str:
        return str(self.dir / "other-ca.pem")

    @property
    def server_cert(self) -> str:
        return str(self.dir / "server.pem")

    @property
    def server_key(self) -> str:
        return str(self.dir / "server.key")

    @property
    def client_cert(self) -> str:
        return str(self.dir / "client.pem")

    @property
    def client_key(self) -> str:
        return str(self.dir / "client.key")


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def _ca(cwd: Path, name: str, cn: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=cwd)


def _leaf(cwd: Path, name: str, cn: str, ext: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd)
    (cwd / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
             cwd=cwd)


def make_pki(directory: Path) -> Pki:
    """Write the CA, the unrelated CA, the server and the client certificates (~0.5 s)."""
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca", "binlake test CA")
    _ca(directory, "other-ca", "unrelated CA")
    common = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
    _leaf(directory, "server", "localhost",
          "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n" + common)
    _leaf(directory, "client", "binlake client", "extendedKeyUsage=clientAuth\n" + common)
    return Pki(directory)


def tls_options(pki: Pki) -> dict[str, str]:
    """``[mariadbd]`` options: serve the certificates, refuse plain TCP connections."""
    return {"ssl-ca": pki.ca, "ssl-cert": pki.server_cert, "ssl-key": pki.server_key,
            "require-secure-transport": "ON"}
