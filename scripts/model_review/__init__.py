"""model_review: review model-provider and config code against a Megatron Core release.

Standard library only; the reviewed code is parsed with ``ast``, never imported (except by
``--build``, which runs it in a child process).  Public API:

- ``review.review_paths(paths, version=None, index=None, rule_ids=None) -> dict``: the
  ``--json`` object (schema below); raises ``review.BadInput`` with one line.
- ``rules.RULES``: the rule table (id, severity, versions, reference, check).
- ``build.run_build(spec, version, timeout) -> dict``: the ``--build`` result.

JSON schema (``SCHEMA_VERSION``): ``schema_version``, ``megatron_version``
(``{"version", "source"}``), ``findings`` (``rule``, ``path``, ``line``, ``severity``,
``message``, ``fix``, ``versions``, ``reference``), ``summary`` (``files``, ``errors``,
``warnings``, ``infos``, ``by_rule``), ``environment`` (facts about this machine, once per
run: ``fact``, ``message``, ``fix``, ``where``; empty when --target-te declares the target),
and ``build`` with ``--build``.
"""

SCHEMA_VERSION = 1
