"""Hermod, an AMQP 1.0 message broker: the one top-level package of the distribution.

In the repository the server, the store, the Alembic scripts and the Spark pipeline live in the
top-level folders `broker/`, `store/`, `migrations/` and `pipeline/`; `hermod/` holds symbolic links
to them, so a checkout imports exactly what a wheel installs (`hermod.broker`, `hermod.store`, ...)
and no generic top-level name (`broker`, `migrations`) reaches site-packages, where another
project's folder of the same name would shadow it.
"""
