#!/bin/sh
# binlake on open-source Spark with delta-spark: every stage through spark-submit.
#
#   conf/spark-submit.sh /data/lake /var/lib/mysql
#   BINLAKE_GOLD_DSN=mysql://user:pw@host:3306/binlake conf/spark-submit.sh /data/lake /var/lib/mysql
#
# bronze -> silver -> quality -> gold (when BINLAKE_GOLD_DSN is set) -> optimize, one
# spark-submit each. spark-submit starts the session (with the Delta extensions below) before
# binlake runs, so pipelines/engine/session.py uses that active session. The gold DSN is read from the
# environment, never put on the command line.
#
# Needs on the driver and executors: Spark 4.0/4.1 (spark-submit on PATH or $SPARK_HOME/bin)
# and the binlake wheel installed without extras (pip install binlake-*.whl: the core brings
# no pyspark of its own). Delta: DELTA_JARS=DIR (a directory of Delta jars, e.g. .venv/delta-jars
# from make setup) or DELTA_PACKAGE (Maven coordinates fetched by Ivy; default the delta-spark
# release matching this Spark's minor version). SPARK_MASTER (default local[*]), PYTHON (the
# Python that has binlake, default python3) and SPARK_SUBMIT_EXTRA (more spark-submit options,
# e.g. "--conf spark.sql.shuffle.partitions=8" for a small lake) may be set too.
set -eu
LAKE=${1:?lake root}
BINLOGS=${2:?binlog directory}
PYTHON=${PYTHON:-python3}
SUBMIT=spark-submit
if [ -n "${SPARK_HOME:-}" ] && [ -x "$SPARK_HOME/bin/spark-submit" ]; then
  SUBMIT="$SPARK_HOME/bin/spark-submit"
fi
ENTRY=$("$PYTHON" -c 'import pipelines.cli.main as m; print(m.__file__)')
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON}"
# A classic job: a Spark Connect setting left in the shell would turn the driver into a client.
unset SPARK_REMOTE SPARK_CONNECT_MODE_ENABLED SPARK_LOCAL_REMOTE

if [ -n "${DELTA_JARS:-}" ]; then
  JARS=$(ls "$DELTA_JARS"/*.jar | tr '\n' ',' | sed 's/,$//')
  DELTA_OPTS="--jars $JARS"
else
  SPARK_MINOR=$("$PYTHON" -c 'import pyspark; print(".".join(pyspark.__version__.split(".")[:2]))' \
                2>/dev/null || echo 4.0)
  DELTA_OPTS="--packages ${DELTA_PACKAGE:-io.delta:delta-spark_2.13:$SPARK_MINOR.0}"
fi

submit() {
  # shellcheck disable=SC2086 # DELTA_OPTS and SPARK_SUBMIT_EXTRA are split on purpose
  "$SUBMIT" \
    --master "${SPARK_MASTER:-local[*]}" \
    $DELTA_OPTS \
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
    --conf spark.sql.session.timeZone=UTC \
    ${SPARK_SUBMIT_EXTRA:-} \
    "$ENTRY" --lake "$LAKE" "$@"
}

submit bronze --binlog-dir "$BINLOGS" --all
submit silver
submit quality
if [ -n "${BINLAKE_GOLD_DSN:-}" ]; then
  submit gold
else
  echo "spark-submit.sh: BINLAKE_GOLD_DSN not set: gold skipped" >&2
fi
submit optimize
