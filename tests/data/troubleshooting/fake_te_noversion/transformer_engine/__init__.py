# Stand-in for a half-installed Transformer Engine: the package imports, but it is not a
# pip-installed release (no __version__, no dist metadata), e.g. a stale source tree on
# PYTHONPATH.
