"""Operations on a whole lake: status, optimize, repair, views, serve."""
