"""The `nsstuck` console script: parses arguments, calls the use cases, prints, sets the exit code.

Exit codes (contract §1): 0 success, 1 failure or verification failed, 2 usage or configuration
error, 3 cluster unreachable or unauthorized; 4 stuck (`diagnose --exit-code`) or would get stuck
(`precheck`), 5 evidence incomplete (`precheck`). A user mistake gets one short line, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bot import __version__
from bot.domain.refs import NAMESPACE_NAME, ClusterName
from bot.errors import ConfigError, NsstuckError, UserError
from bot.kube import clientfiles

# the settings' model (pydantic) is imported by the commands that read settings, the others start
# without it (`diagnose --kubeconfig`), as they start without the store, Slack or the scheduler
if TYPE_CHECKING:
    from bot.domain.findings import Diagnosis
    from bot.kube.collecting import Progress
    from bot.kube.connecting import ClusterTarget
    from bot.kube.registry import ClusterRegistry
    from bot.services.diagnosing import Diagnoser
    from bot.services.outbox import Outbox
    from bot.settings import AppConfig, Settings
    from bot.store.database import Database
    from bot.store.migrating import MigrationTarget

log = logging.getLogger("nsstuck")


Handler = Callable[[argparse.Namespace, "Context"], int]


class Context:
    """What a command needs, loaded lazily so that `--help` and `db` work without a config file."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self._settings: Settings | None = None
        self._config: AppConfig | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from bot.settings import load_settings

            self._settings = load_settings()
        return self._settings

    @property
    def config_path(self) -> Path:
        explicit: Path | None = getattr(self.args, "config", None)
        return explicit if explicit is not None else self.settings.config_path

    @property
    def config(self) -> AppConfig:
        if self._config is None:
            explicit = getattr(self.args, "config", None) is not None
            # the default path may be absent (ad-hoc use with --kubeconfig); a named file may not
            required = explicit or not self.settings.config_path_is_default
            from bot.settings import load_config

            self._config = load_config(self.config_path, required=required)
        return self._config

    def print(self, text: str = "") -> None:
        print(text, file=self.out)


# ---------------------------------------------------------------------------------------------
# Commands


def cmd_config_check(args: argparse.Namespace, ctx: Context) -> int:
    """Every problem of the environment and the config file at once, each on its own line."""
    from bot.settings import DEFAULT_CONFIG_PATH, config_problems, config_warnings, settings_problems
    from bot.store.database import redact_url  # the store is only needed by this branch

    settings, problems = settings_problems()
    explicit: Path | None = args.config
    path = explicit or (
        settings.config_path if settings else Path(os.environ.get("NSSTUCK_CONFIG") or DEFAULT_CONFIG_PATH)
    )
    default = explicit is None and path == DEFAULT_CONFIG_PATH
    exists = path.exists()
    config, file_problems = config_problems(path, required=not default)
    problems += file_problems
    # valid, but probably not meant (a digest showing a cluster its channel may not use): said, exit 0
    warnings = config_warnings(path, config) if config is not None and exists else []
    data: dict[str, Any] = {
        "schema": "nsstuck.config-check/v1",
        "valid": not problems,
        "problems": [str(p) for p in problems],
        "warnings": [str(w) for w in warnings],
        "config": {"path": str(path), "exists": exists, "default": default},
    }
    lines: list[str] = []
    if not exists and default:
        lines.append(f"config: no config file at {path} (the default path): no clusters are registered")
    elif config is not None:
        lines.append(f"config: {path} is valid")
    if settings is not None:
        data["database"] = redact_url(settings.database_url)
        lines.append(f"database: {data['database']}")
        if settings.migration_database_url:
            lines.append(f"migrations: {redact_url(settings.migration_database_url)}")
    if config is not None:
        data["clusters"] = config.cluster_names
        lines.append(f"clusters: {', '.join(config.cluster_names) if config.clusters else 'none'}")
        data["digests"] = []
        for digest in config.digests:
            covered = config.digest_clusters(digest)
            scope = ", ".join(covered) if covered else "no cluster"
            if not digest.clusters:
                scope += ": those its channel may use"
            data["digests"].append(
                {
                    "channel": digest.channel,
                    "schedule": digest.schedule,
                    "clusters": list(digest.clusters),
                    "covers": list(covered),
                }
            )
            lines.append(f"digest: {digest.channel} at '{digest.schedule}' {digest.timezone} ({scope})")
    if settings is not None:
        lines.append(_slack_line(settings, data))
    if args.output != "text":
        _emit(ctx, args, data, str)
    else:
        for line in [] if problems else lines:  # invalid: the problems alone, on stderr
            ctx.print(line)
        for problem in problems:
            print(f"nsstuck: config error: {problem}", file=ctx.err)
        for warning in warnings:
            print(f"nsstuck: config warning: {warning}", file=ctx.err)
    return 2 if problems else 0


def _slack_line(settings: Settings, data: dict[str, Any]) -> str:
    """What `nsstuck serve` would find of Slack's variables, each missing one named."""
    socket = settings.slack_app_token is not None
    missing = [] if settings.slack_bot_token is not None else ["SLACK_BOT_TOKEN (the bot token, xoxb-...)"]
    if not socket and settings.slack_signing_secret is None:
        missing.append("SLACK_SIGNING_SECRET (HTTP mode; or SLACK_APP_TOKEN, xapp-..., for Socket Mode)")
    data["slack"] = {"mode": "socket" if socket else "http", "missing": [m.split(" ")[0] for m in missing]}
    mode = "socket mode" if socket else "HTTP mode"
    if missing:
        return f"slack: {mode}, not set for nsstuck serve: {'; '.join(missing)}"
    return f"slack: {mode}, credentials set"


SLACK_HINT = """\
nsstuck serve needs the Slack app's credentials in the environment:
  SLACK_BOT_TOKEN       the Bot User OAuth Token (xoxb-...): your app's settings, Install App
  SLACK_SIGNING_SECRET  HTTP mode: the Signing Secret: your app's settings, Basic Information
  SLACK_APP_TOKEN       or, for Socket Mode instead, an app-level token (xapp-...) with connections:write
How to create the app from slack/manifest.yaml: README, "From nothing to a working bot in your workspace".
To see the whole product without Slack or a cluster first: make demo
"""


def cmd_serve(args: argparse.Namespace, ctx: Context) -> int:
    settings = ctx.settings
    config = ctx.config
    if settings.slack_bot_token is None or (settings.slack_app_token is None and settings.slack_signing_secret is None):
        ctx.err.write(SLACK_HINT)  # then the one line that says what is missing
    if settings.slack_bot_token is None:
        raise ConfigError("environment", "SLACK_BOT_TOKEN", "required by serve (the bot token, xoxb-...)")
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        raise ConfigError(
            "environment", "SLACK_SIGNING_SECRET", "required in HTTP mode (or set SLACK_APP_TOKEN for Socket Mode)"
        )
    if settings.admission_port is not None:  # a webhook that cannot serve TLS is said before anything starts
        from bot.admission.server import check_pair

        assert settings.admission_cert is not None  # (the settings' check: with the port, both are set)
        assert settings.admission_key is not None
        check_pair(
            str(settings.admission_cert),
            str(settings.admission_key),
            ("NSSTUCK_ADMISSION_CERT", "NSSTUCK_ADMISSION_KEY"),
        )
    from functools import partial

    from bot.store import schema_version
    from bot.store.database import Database

    current, head = schema_version.current_revision(settings.database_url), schema_version.HEAD_REVISION
    if current != head:
        raise ConfigError(
            "environment",
            "NSSTUCK_DATABASE_URL",
            f"the database schema is at {current or 'nothing'}, not {head}: run `nsstuck db upgrade` first",
        )
    from bot import logs
    from bot.kube.collecting import CollectOptions
    from bot.kube.registry import ClusterRegistry
    from bot.kube.requesting import MIB
    from bot.scheduler import running as scheduling
    from bot.scheduler.jobs import job_list
    from bot.services.answering import Answering
    from bot.services.digesting import clock_for
    from bot.services.metrics import Metrics, StoreMetrics
    from bot.services.outbox import Outbox
    from bot.services.recording import earlier_of
    from bot.services.remediating import Remediation, remediation_open
    from bot.services.supervising import WORKER_NICENESS, Priority, WorkerPool, default_size
    from bot.services.tenancy import Tenancy
    from bot.services.watching import watched_clusters
    from bot.services.working import WorkerSetup
    from bot.slack.app import create_app
    from bot.slack.notifier import SlackNotifier
    from bot.slack.people import PeopleDirectory
    from bot.slack.server import serve

    # the composition root: the pieces are built here, once, and handed to each other
    db = Database(settings.database_url)
    metrics = Metrics()
    # a client per cluster kept between the bot's own calls (the watch's lists, the follow-ups' checks);
    # every request to a cluster is counted and timed (nsstuck_kube_requests_total), the workers' relayed
    clusters = ClusterRegistry.from_config(
        config,
        ctx.config_path,
        pool_size=CollectOptions().workers,
        credential_timeout=settings.credential_timeout_seconds,
        observer=metrics,
    )
    clock = clock_for(settings.clock_file)
    # open incidents, the outbox's backlog and the watched clusters, read from the database at each scrape
    metrics.registry.register(
        StoreMetrics(db, clock=clock, registered=clusters.knows, watched=[w.cluster for w in watched_clusters(config)])
    )
    # diagnoses (and remediation's re-checks) run in worker processes, started now, in the background:
    # the bot answers while they start, and a job waits for the first that is ready
    deadline = settings.diagnosis_deadline_seconds
    options = CollectOptions(
        deadline=deadline,
        call_timeout=min(10.0, deadline),
        max_answer=settings.max_answer_mb * MIB,
        no_progress_after=settings.no_progress_minutes * 60,
    )
    workers = WorkerPool(
        size=settings.diagnosis_workers or default_size(),
        setup=WorkerSetup(
            log_level=logging.getLevelName(logging.getLogger().level),
            log_format=logs.current_format(),
            credential_timeout=settings.credential_timeout_seconds,
            pool_size=options.workers,
            niceness=WORKER_NICENESS,
            max_answer_bytes=int(settings.worker_max_answer_mb * MIB),
        ),
        metrics=metrics,
        max_rss_mb=settings.worker_max_rss_mb,
        answer_seconds=settings.worker_answer_seconds,
    )
    slack = SlackNotifier(settings=settings, config=config, db=db, metrics=metrics)
    earlier = partial(earlier_of, db)  # the earlier looks of an open incident go with its diagnosis job
    diagnoser = workers.diagnoser(clusters.target, priority=Priority.PERSON, options=options, earlier=earlier)
    # diagnose_as: requester (issue 39): who a person is on such a cluster, what they may get and be shown
    tenancy = (
        Tenancy(config, clusters, PeopleDirectory(slack.client))
        if any(c.as_requester for c in config.clusters)
        else None
    )
    outbox = Outbox(
        db, slack, remediable=partial(remediation_open, config), shown=None if tenancy is None else tenancy.shown
    )
    answering = Answering(
        db,
        diagnose=diagnoser,
        outbox=outbox,
        metrics=metrics,
        outage_seconds=settings.db_outage_seconds,
        workers=workers.size,  # one waiting for each worker: the rest wait in answering's queue, bounded
        queue_limit=settings.diagnosis_queue,
        recurrence_after=settings.recurrence_after,
    )
    remediation = Remediation(
        db,
        config=config,
        settings=settings,
        clusters=clusters,
        notifier=slack,
        people=PeopleDirectory(slack.client),
        metrics=metrics,
        check_cause=workers.check_cause,
    )
    from bot.services.clusterchecking import ClusterChecks

    checks = ClusterChecks(config, clusters)
    closing = (answering.close, remediation.close, workers.close, checks.close, slack.close, clusters.close)
    try:
        door = create_app(
            settings=settings,
            config=config,
            db=db,
            metrics=metrics,
            slack=slack,
            answering=answering,
            remediation=remediation,
            cluster_checks=checks,
            closing=closing,
            tenancy=tenancy,
        )
    except BaseException:
        # Slack refused the token, or could not be reached: the workers still starting in the background are
        # stopped first, so that the error is the last line the process says (not a worker's "started" after it)
        for close in closing:
            close()
        raise
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token else None
    jobs = job_list(
        settings,
        config=config,
        db=db,
        clusters=clusters,
        diagnoser=workers.diagnoser(clusters.target, priority=Priority.SCHEDULE, options=options, earlier=earlier),
        outbox=outbox,
        remediation=remediation,
        notifier=slack,
        clock=clock,
        metrics=metrics,
    )
    admission = (
        None
        if settings.admission_port is None
        else _admission_door(ctx, db=db, clusters=clusters, diagnoser=diagnoser, outbox=outbox)
    )
    gc.freeze()  # everything imported and built so far lives as long as the process: keep it out of the GC's way
    scheduler = scheduling.start(jobs, succeeded=metrics.job_succeeded)

    def alive() -> list[str]:  # /healthz: what the process cannot do without
        return [*scheduling.problems(scheduler), *answering.problems(), *remediation.problems(), *workers.problems()]

    try:
        serve(
            door,
            port=settings.http_port,
            metrics_port=settings.metrics_port,
            app_token=app_token,
            ping_interval=settings.socket_ping_seconds,
            stale_after=settings.socket_stale_seconds,
            alive=alive,
        )
    finally:
        scheduling.stop(scheduler)
        if admission is not None:
            admission()
    return 0


def _admission_door(
    ctx: Context, *, db: Database, clusters: ClusterRegistry, diagnoser: Diagnoser, outbox: Outbox
) -> Callable[[], None]:
    """`serve`'s namespace-delete webhook (issue 38): `POST /admission/namespaces/CLUSTER` over TLS on
    NSSTUCK_ADMISSION_PORT, one reviewer per registered cluster (its `admission:` mode and budget), each
    decision followed up off the request path (`AdmissionEvents`). Serving in a thread of its own; the
    function returned stops it."""
    from bot.admission.server import AdmissionServer, Certificates
    from bot.kube.connecting import ConnectionCache
    from bot.services.admission import Reviewer, cluster_check
    from bot.services.admission_events import AdmissionEvents, namespace_probe

    settings, config = ctx.settings, ctx.config
    assert settings.admission_port is not None
    assert settings.admission_cert is not None
    assert settings.admission_key is not None
    connections = ConnectionCache()
    probe = namespace_probe(clusters)
    reviewers: dict[str, Reviewer] = {}
    followers: list[AdmissionEvents] = []
    for cluster in config.clusters:
        events = AdmissionEvents(
            db,
            cluster=cluster.cluster_name,
            mode=cluster.admission.mode,
            channel=cluster.admission_channel,
            probe=probe,
            diagnoser=diagnoser,
            outbox=outbox,
            recurrence_after=settings.recurrence_after,
        )
        followers.append(events)
        reviewers[cluster.name] = Reviewer(
            cluster_check(clusters.target(cluster.cluster_name), connections),
            budget=cluster.admission.budget_seconds,
            mode=cluster.admission.mode,
            heard=events.heard,
        )
    certificates = Certificates(str(settings.admission_cert), str(settings.admission_key))
    server = AdmissionServer(reviewers.get, certificates, "0.0.0.0", settings.admission_port)  # noqa: S104 (the API server calls it)
    try:
        host, port = server.bind()
    except OSError as e:
        raise ConfigError(
            "environment",
            "NSSTUCK_ADMISSION_PORT",
            f"cannot listen on port {settings.admission_port}: {e.strerror or e}",
        ) from None
    thread = threading.Thread(target=server.serve, name="admission", daemon=True)
    thread.start()
    log.info(
        "admission: serving https://%s:%d/admission/namespaces/CLUSTER for %s",
        host,
        port,
        ", ".join(f"{name} ({r.mode}, {r.budget:g} s)" for name, r in reviewers.items()) or "no cluster",
    )

    def stop() -> None:
        server.server.stop()
        thread.join(timeout=10)
        for events in followers:
            events.close()
        for reviewer in reviewers.values():
            reviewer.close()
        connections.close()

    return stop


def _migration_target(ctx: Context, *, granting: bool = False) -> MigrationTarget:
    """The `db` commands' database (and, for `db upgrade`, `granting`, the runtime role to grant)."""
    from bot.store import migrating

    settings = ctx.settings
    if not granting:
        return migrating.migration_database(settings.database_url, settings.migration_database_url)
    return migrating.migration_target(
        settings.database_url, settings.migration_database_url, settings.database_runtime_role
    )


def cmd_db_upgrade(args: argparse.Namespace, ctx: Context) -> int:
    from bot.store import migrating
    from bot.store.database import redact_url

    target = _migration_target(ctx, granting=True)
    url, variable = target.url, target.variable
    migrating.upgrade(url, args.revision, variable=variable, runtime_role=target.runtime_role)
    ctx.print(f"database {redact_url(url)} is at revision {migrating.current_revision(url, variable=variable)}")
    if target.runtime_role:
        ctx.print(f"runtime role {target.runtime_role}: granted what nsstuck serve needs, and no more")
    return 0


def cmd_db_downgrade(args: argparse.Namespace, ctx: Context) -> int:
    from bot.store import migrating
    from bot.store.database import redact_url

    target = _migration_target(ctx)
    url, variable = target.url, target.variable
    migrating.downgrade(url, args.revision, variable=variable)
    revision = migrating.current_revision(url, variable=variable)
    ctx.print(f"database {redact_url(url)} is at revision {revision or 'base'}")
    return 0


def cmd_db_current(args: argparse.Namespace, ctx: Context) -> int:
    from bot.store import migrating

    target = _migration_target(ctx)
    current = migrating.current_revision(target.url, variable=target.variable)
    head = migrating.head_revision()
    data = {"schema": "nsstuck.db/v1", "current": current, "head": head, "at_head": current == head}
    _emit(ctx, args, data, lambda: f"current: {current or 'none (empty database)'}\nhead: {head}\n")
    return 0 if current == head else 1


def _select_cluster(args: argparse.Namespace, ctx: Context) -> ClusterTarget:
    """The cluster named by the selection options (contract §1), checked before anything connects:
    `--cluster NAME` from the config file, else the kubeconfig found the way kubectl finds it
    (`--kubeconfig`, else `$KUBECONFIG`, a path list, else `~/.kube/config`) with its current context
    or `--context`, whether or not the config file lists clusters."""
    from bot.kube.connecting import ClusterTarget, current_context, joined, kubeconfig_paths

    if args.cluster and args.kubeconfig:
        raise UserError("use either --cluster NAME or --kubeconfig PATH, not both")
    if args.cluster and args.context:
        raise UserError("use either --cluster NAME (its context is in the config file) or --context NAME, not both")
    if args.cluster:
        from bot.kube.registry import ClusterRegistry

        cluster = ctx.config.require_cluster(args.cluster)  # unknown: said with the closest registered name
        return ClusterRegistry.from_config(ctx.config, ctx.config_path).target(cluster.cluster_name)
    paths = kubeconfig_paths(args.kubeconfig, os.environ)
    kubeconfig = paths[0] if len(paths) == 1 else joined(paths)
    context = args.context or current_context(kubeconfig)
    name = ClusterName(context or paths[0].name)
    return ClusterTarget(name=name, kubeconfig=kubeconfig, context=context)


def cmd_diagnose(args: argparse.Namespace, ctx: Context) -> int:
    from bot.kube.collecting import CollectOptions
    from bot.services.diagnosing import diagnose_namespace
    from bot.services.reporting import render_text

    if not NAMESPACE_NAME.match(args.namespace):
        raise UserError(f"{args.namespace!r} is not a valid namespace name (lower-case letters, digits and '-')")
    if args.timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    target = _select_cluster(args, ctx)
    progress = _ProgressLine(ctx.err, f"{target.name}/{args.namespace}") if _is_terminal(ctx.err) else None
    # 64 calls at a time: a lone diagnosis waits for the network more than for its CPU (bench/diagnose.py:
    # on the 1,000-type cluster, 64 collected faster than 32 and than 96)
    options = CollectOptions(
        deadline=args.timeout,
        call_timeout=min(10.0, args.timeout),
        workers=CLI_CALLS,
        progress=progress,
        max_answer=_max_answer(ctx),
        no_progress_after=_no_progress_after(ctx),
    )
    with _without_cycle_collection():
        try:
            result = diagnose_namespace(target, args.namespace, options=options)
        finally:
            if progress is not None:
                progress.clear()
        diagnosis = _recalled(ctx, result.diagnosis, result.summary.family)
        del result  # the snapshot: not printed, and as large as the report that is about to be encoded
        colour = _is_terminal(ctx.out) and not os.environ.get("NO_COLOR")
        _emit(ctx, args, diagnosis.to_json(), lambda: render_text(diagnosis, colour=colour))
    if args.exit_code and is_stuck(diagnosis):
        cause = diagnosis.cause.value if diagnosis.cause else "unknown"
        print(f"nsstuck: {args.namespace} on {target.name} is stuck: {cause}", file=ctx.err)
        return STUCK
    return 0


def _recalled(ctx: Context, diagnosis: Diagnosis, family: str | None) -> Diagnosis:
    """With NSSTUCK_DATABASE_URL set, the diagnosis with what that database remembers of the same cause and
    blocking object (`seen_before`, `recurrence`; issue 39 §3), read only: `diagnose` records nothing. A
    database that cannot be read is said in one line on stderr, and the report is given without them."""
    if not os.environ.get("NSSTUCK_DATABASE_URL"):
        return diagnosis
    from bot.services.recording import recall

    recalled, unknown = recall(
        lambda: _migrated_database(ctx), diagnosis, family, recurrence_after=ctx.settings.recurrence_after
    )
    if unknown is not None:
        print(f"nsstuck: seen before: unknown ({unknown})", file=ctx.err)
    return recalled


def _max_answer(ctx: Context) -> int:
    """NSSTUCK_MAX_ANSWER_MB in bytes. The settings (their model, and every variable checked) are loaded
    only when it is set: `diagnose --kubeconfig` starts without them."""
    from bot.kube.requesting import MAX_ANSWER, MIB

    if not os.environ.get("NSSTUCK_MAX_ANSWER_MB"):
        return MAX_ANSWER
    return ctx.settings.max_answer_mb * MIB


def _no_progress_after(ctx: Context) -> float:
    """NSSTUCK_NO_PROGRESS_MINUTES in seconds (the settings are loaded only when it is set)."""
    if not os.environ.get("NSSTUCK_NO_PROGRESS_MINUTES"):
        return 1800.0
    return ctx.settings.no_progress_minutes * 60


def cmd_precheck(args: argparse.Namespace, ctx: Context) -> int:
    """Would deleting an Active namespace now get stuck? Reads only (the read role); changes nothing."""
    from bot.kube.collecting import CollectOptions
    from bot.services.diagnosing import diagnose_namespace
    from bot.services.prechecking import predicted, refuse_immortal, verdict
    from bot.services.reporting import render_text

    namespace = args.namespace
    if not NAMESPACE_NAME.match(namespace):
        raise UserError(f"{namespace!r} is not a valid namespace name (lower-case letters, digits and '-')")
    if args.timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    refuse_immortal(namespace)
    target = _select_cluster(args, ctx)
    terminal = _is_terminal(ctx.err)
    progress = _ProgressLine(ctx.err, f"{target.name}/{namespace}", doing="prechecking") if terminal else None
    options = CollectOptions(
        deadline=args.timeout, call_timeout=min(10.0, args.timeout), progress=progress, max_answer=_max_answer(ctx)
    )
    try:
        diagnosis = diagnose_namespace(target, namespace, options=options).diagnosis
    finally:
        if progress is not None:
            progress.clear()
    prediction = predicted(diagnosis, target.name, use_instead=f"`nsstuck diagnose {namespace}`")
    colour = _is_terminal(ctx.out) and not os.environ.get("NO_COLOR")
    _emit(ctx, args, diagnosis.to_json(), lambda: render_text(diagnosis, colour=colour))
    # a non-zero exit ends with one line on stderr saying why (contract §1)
    said, code = verdict(prediction)
    if said == "would_block":
        reason = next(f for f in prediction.findings if f.blocking)
        print(f"nsstuck: deleting {namespace} on {target.name} would get stuck: {reason.cause.value}", file=ctx.err)
    elif said == "incomplete":
        print(
            f"nsstuck: {namespace} on {target.name}: the evidence is incomplete ({len(prediction.gaps)} gap(s)), "
            "so it cannot be said that nothing would hold the deletion",
            file=ctx.err,
        )
    return code


def _admission_target(args: argparse.Namespace, ctx: Context) -> ClusterTarget:
    """The cluster of `admission serve`: the kubeconfig found as kubectl finds it, else, in a pod (no
    kubeconfig anywhere, KUBERNETES_SERVICE_HOST set), the in-cluster configuration."""
    from bot.kube.connecting import ClusterTarget

    try:
        return _select_cluster(args, ctx)
    except UserError:
        if args.kubeconfig or args.context or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise
    return ClusterTarget(name=ClusterName("in-cluster"), in_cluster=True)


def cmd_admission_serve(args: argparse.Namespace, ctx: Context) -> int:
    """The namespace-delete admission webhook alone, for one cluster: no Slack, no database (issue 38 §7)."""
    from bot.admission.server import AdmissionServer, Certificates, check_pair
    from bot.kube.connecting import ConnectionCache
    from bot.services.admission import MAX_BUDGET, Reviewer, cluster_check

    if not 0 < args.budget <= MAX_BUDGET:
        raise UserError(f"--budget must be more than 0 and at most {MAX_BUDGET:g} seconds (the API server allows 30)")
    if not 0 <= args.port <= 65535:
        raise UserError("--port must be a port number, 0-65535 (0: any free port)")
    check_pair(args.cert, args.key)
    target = _admission_target(args, ctx)
    connections = ConnectionCache()
    try:
        with connections.lease(target):  # a kubeconfig or context that cannot work is said now (exit 2)
            pass
        reviewer = Reviewer(cluster_check(target, connections), budget=args.budget, mode=args.mode)
        try:
            server = AdmissionServer(reviewer, Certificates(args.cert, args.key), args.address, args.port)
            try:
                host, port = server.bind()
            except OSError as e:
                raise UserError(f"cannot listen on {args.address}:{args.port}: {e.strerror or e}") from None
            server.stop_on_signals()
            log.info(
                "admission: serving https://%s:%d/admission/namespaces for cluster %s (mode %s, budget %g s)",
                host,
                port,
                target.name,
                args.mode,
                args.budget,
            )
            server.serve()
        finally:
            reviewer.close()
    finally:
        connections.close()
    log.info("admission: stopped")
    return 0


def cmd_mcp(args: argparse.Namespace, ctx: Context) -> int:
    """The agents' door: read-only tools over MCP, on stdio (every cluster of the config) or on streamable HTTP
    behind the config's bearer tokens (each sees only its clusters). Nothing it serves changes a cluster."""
    import socket

    from bot.kube.registry import ClusterRegistry
    from bot.mcp.server import http_app, serve_http, serve_stdio, terminated_cleanly
    from bot.services.agents import AgentTools, Caller
    from bot.services.limiting import CommandLimits
    from bot.settings import MCP_TOKEN_MIN_LENGTH

    config, settings = ctx.config, ctx.settings
    if not config.clusters:
        raise ConfigError(str(ctx.config_path), "clusters", "nsstuck mcp serves the config's clusters: there are none")
    tokens: dict[str, Caller] = {}
    if args.http is not None:
        if not 0 <= args.http <= 65535:
            raise UserError("--http must be a port number, 0-65535 (0: any free port)")
        if not config.mcp.tokens:
            raise ConfigError(
                str(ctx.config_path),
                "mcp.tokens",
                "--http needs at least one token: mcp: {tokens: [{name, token_env, clusters}]}",
            )
        for index, token in enumerate(config.mcp.tokens):
            value = os.environ.get(token.token_env, "").strip()
            if len(value) < MCP_TOKEN_MIN_LENGTH:
                said = "is not set" if not value else f"is shorter than {MCP_TOKEN_MIN_LENGTH} characters"
                raise ConfigError(
                    "environment", token.token_env, f"the token of mcp.tokens[{index}] ({token.name}) {said}"
                )
            if value in tokens:
                raise ConfigError("environment", token.token_env, f"the same token as {tokens[value].name}'s")
            tokens[value] = Caller(token.name, frozenset(token.clusters))
    limits = CommandLimits(
        user_per_minute=settings.user_commands_per_minute, channel_per_minute=settings.channel_commands_per_minute
    )
    registry = ClusterRegistry.from_config(config, ctx.config_path)
    tools = AgentTools(
        config,
        registry,
        limits=limits,
        database=lambda: _migrated_database(ctx),
        max_answer=_max_answer(ctx),
        no_progress_after=_no_progress_after(ctx),
        remember=bool(os.environ.get("NSSTUCK_DATABASE_URL")),
        recurrence_after=settings.recurrence_after,
    )
    try:
        if args.http is None:
            serve_stdio(tools, Caller("stdio", frozenset(config.cluster_names)))
        else:
            with terminated_cleanly():
                sock = socket.socket(socket.AF_INET6 if ":" in args.address else socket.AF_INET)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        sock.bind((args.address, args.http))
                    except OSError as e:
                        raise UserError(f"cannot listen on {args.address}:{args.http}: {e.strerror or e}") from None
                    sock.listen(128)
                    port = sock.getsockname()[1]
                    said = "mcp: serving streamable HTTP on http://%s:%d/mcp for %d token(s)"
                    log.info(said, args.address, port, len(tokens))
                    serve_http(http_app(tools, tokens, host=args.address), sock)
                finally:
                    sock.close()
    finally:
        registry.close()
    log.info("mcp: stopped")
    return 0


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused for the `with` block (one diagnosis of a command).

    A diagnosis decodes tens of thousands of JSON objects that stay alive until the report is written:
    each of the collector's passes walks them all, for nothing (they hold no reference cycles, and
    reference counting frees them). On the 1,000-type benchmark cluster that was about 0.15 s of CPU, and
    the peak RSS is the same without it (bench/diagnose.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False


class _ProgressLine:
    """One line on stderr, rewritten in place while a diagnosis collects (a terminal only)."""

    def __init__(self, err: TextIO, what: str, *, doing: str = "diagnosing") -> None:
        self.err = err
        self.what = what
        self.doing = doing
        self.shown = False

    def __call__(self, progress: Progress) -> None:
        if progress.lists_total == 0:
            step = f"discovery {progress.discovery_done}/{progress.discovery_total}"
        else:
            step = f"discovery done, lists {progress.lists_done}/{progress.lists_total}"
        self.err.write(f"\r\x1b[Knsstuck: {self.doing} {self.what}: {step}")
        self.err.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.err.write("\r\x1b[K")
            self.err.flush()


STUCK = 4  # `diagnose --exit-code`: terminating, and a finding holds it
CLI_CALLS = 64  # calls at once of `nsstuck diagnose`


def is_stuck(diagnosis: Diagnosis) -> bool:
    """Terminating, with a blocking finding; content still being deleted normally is not stuck."""
    from bot.domain.findings import Cause, NamespaceState

    return diagnosis.state is NamespaceState.TERMINATING and any(
        f.blocking and f.cause is not Cause.CONTENT_DELETING for f in diagnosis.findings
    )


def _migrated_database(ctx: Context) -> Database:
    """The database of NSSTUCK_DATABASE_URL, refused (exit 2, one line) unless its schema is at head."""
    from bot.store import schema_version
    from bot.store.database import Database

    url = ctx.settings.database_url
    current, head = schema_version.current_revision(url), schema_version.HEAD_REVISION
    if current != head:
        raise ConfigError(
            "environment",
            "NSSTUCK_DATABASE_URL",
            f"the schema is at {current or 'nothing (an empty database)'}, not at head {head}: "
            "run `nsstuck db upgrade`",
        )
    return Database(url)


def cmd_history(args: argparse.Namespace, ctx: Context) -> int:
    from bot.domain.findings import Cause
    from bot.services.history import MAX_LIMIT, history
    from bot.services.history_text import render_text

    if not 1 <= args.limit <= MAX_LIMIT:
        raise UserError(f"--limit must be between 1 and {MAX_LIMIT}")
    causes = [c.value for c in Cause]
    if args.cause is not None and args.cause not in causes:
        raise UserError(f"--cause {args.cause!r} is not a cause; one of: {', '.join(causes)}")
    db = _migrated_database(ctx)
    try:
        result = history(
            db,
            cluster=args.cluster,
            namespace=args.namespace,
            open_only=args.open,
            limit=args.limit,
            cause=args.cause,
        )
    finally:
        db.dispose()
    _emit(ctx, args, result.to_json(), lambda: render_text(result))
    return 0


def cmd_audit_verify(args: argparse.Namespace, ctx: Context) -> int:
    from bot.services.auditing import expected_head, verify

    expect = None if args.expect_head is None else expected_head(args.expect_head)  # before the database
    db = _migrated_database(ctx)
    try:
        report = verify(db, expect_head=expect)
    finally:
        db.dispose()
    expected = report.expected
    data = {
        "schema": "nsstuck.audit-verify/v1",
        "intact": report.intact,
        "entries": report.entries,
        "head": {"seq": report.head_seq, "hash": report.head_hash},
        "backups": report.backups,
        "problem_count": report.problem_count,
        "problems": list(report.problems),
        "expected": None
        if expected is None
        else {"prefix": expected.prefix, "seq": expected.seq, "hash": expected.hash, "reached": expected.reached},
    }
    _emit(ctx, args, data, lambda: "".join(f"{line}\n" for line in report.lines()))
    return 0 if report.intact else 1


def _iso_time(value: str) -> datetime:
    """An ISO 8601 time for --since; without a zone it is UTC."""
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise UserError(f"--since {value!r} is not an ISO time (for example 2026-11-21T10:00:00Z)") from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def cmd_audit_export(args: argparse.Namespace, ctx: Context) -> int:
    from bot.services.auditing import export

    since = None if args.since is None else _iso_time(args.since)
    if args.request is not None and args.request < 1:
        raise UserError("--request must be a positive request id")
    db = _migrated_database(ctx)
    try:
        fmt = "csv" if args.csv or args.output == "csv" else "json"
        for chunk in export(db, fmt, since=since, request=args.request):
            ctx.out.write(chunk)
        ctx.out.flush()
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error worth a traceback
        if ctx.out is sys.stdout:  # and Python's own flush at exit must not complain either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        db.dispose()
    return 0


def cmd_backup_show(args: argparse.Namespace, ctx: Context) -> int:
    from bot.services.auditing import load_backup, render_backup

    db = _migrated_database(ctx)
    try:
        backup = load_backup(db, args.id)
    finally:
        db.dispose()
    if args.output == "yaml":
        ctx.out.write(render_backup(backup, raw=args.raw))
    else:
        from bot.services.auditing import backup_document

        ctx.print(json.dumps(backup_document(backup, raw=args.raw), indent=2))
    if not backup.intact:
        print(f"nsstuck: backup {backup.id} does not match its sha256: it was changed after it was taken", file=ctx.err)
        return 1
    return 0


def cmd_digest_run(args: argparse.Namespace, ctx: Context) -> int:
    from functools import partial

    from bot.kube.registry import ClusterRegistry
    from bot.services.digest_text import render_text
    from bot.services.digesting import clock_for, run_now

    # the imports leave ~100k objects that every full collection would walk again; they live forever
    gc.freeze()

    config, settings = ctx.config, ctx.settings
    channels = [args.channel] if args.channel else list(dict.fromkeys(d.channel for d in config.digests))
    if not channels:
        raise UserError("no digest is configured (digests: in the config file); name one with --channel ID")
    poster = None
    if not args.dry_run:
        if settings.slack_bot_token is None:
            raise ConfigError("environment", "SLACK_BOT_TOKEN", "required to post a digest (or use --dry-run)")
        poster = _digest_poster(settings)
    clock = clock_for(settings.clock_file)
    db = _migrated_database(ctx)
    clusters = ClusterRegistry.from_config(
        config, ctx.config_path, credential_timeout=settings.credential_timeout_seconds
    )
    try:
        for channel in channels:
            digest = run_now(db, config, clusters, channel=channel, now=clock(), poster=poster)
            if args.dry_run:
                _emit(ctx, args, digest.to_json(), partial(render_text, digest))
            else:
                ctx.print(f"digest posted to {channel}: {digest.stuck} stuck")
    finally:
        db.dispose()
    return 0


def _digest_poster(settings: Settings) -> Callable[[Any], str | None]:
    from bot.slack.digest_posting import direct_poster

    return direct_poster(settings)


def cmd_clusters_check(args: argparse.Namespace, ctx: Context) -> int:
    from bot.kube.registry import ClusterRegistry
    from bot.services.clusterchecking import ClustersCheck, check_cluster, render_table
    from bot.settings import ClusterConfig

    if args.timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    adhoc = bool(args.kubeconfig or args.context) or (not args.cluster and not ctx.config.clusters)
    if adhoc:
        # no registered cluster (or a kubeconfig named): the one kubectl would use, for reading only
        target = _select_cluster(args, ctx)
        # not validated as a registered name: a context may be named anything (arn:aws:eks:...)
        pairs = [(ClusterConfig.model_construct(name=str(target.name), remediation=False), target)]
    else:
        config = ctx.config
        clusters = [config.require_cluster(args.cluster)] if args.cluster else list(config.clusters)
        registry = ClusterRegistry.from_config(config, ctx.config_path)
        pairs = [(cluster, registry.target(cluster.cluster_name)) for cluster in clusters]
    report = ClustersCheck(
        [
            check_cluster(
                cluster,
                target,
                timeout=args.timeout,
                credential_timeout=ctx.settings.credential_timeout_seconds,
            )
            for cluster, target in pairs
        ]
    )
    _emit(ctx, args, report.to_json(), lambda: render_table(report))
    unreachable = [c.cluster for c in report.clusters if not c.reachable]
    missing = [f"{c.cluster} ({len(c.missing)})" for c in report.clusters if c.reachable and c.missing]
    if unreachable or missing:  # the last line says why the exit code is not 0 (contract §1)
        why = [f"unreachable: {', '.join(unreachable)}"] if unreachable else []
        why += [f"permissions missing on {', '.join(missing)}"] if missing else []
        print(f"nsstuck: {'; '.join(why)}", file=ctx.err)
    return report.exit_code


def cmd_completion(args: argparse.Namespace, ctx: Context) -> int:
    ctx.out.write(completion_script(build_parser(), args.shell))
    return 0


def _completion_table(parser: argparse.ArgumentParser, path: str = "nsstuck") -> dict[str, list[str]]:
    """Per command path ("nsstuck", "nsstuck db upgrade"...): the words that may come next (its
    commands and options); per "path OPTION": the option's choices."""
    table: dict[str, list[str]] = {path: []}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                table[path].append(name)
                table.update(_completion_table(sub, f"{path} {name}"))
        else:
            table[path] += [o for o in action.option_strings if o.startswith("--") or len(action.option_strings) == 1]
            if action.choices and not action.option_strings:  # a positional argument's choices
                table[path] += [str(c) for c in action.choices]
            if action.choices and action.option_strings:
                for option in action.option_strings:
                    table[f"{path} {option}"] = [str(c) for c in action.choices]
    return table


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """A completion script for bash (zsh runs it through bashcompinit) for nsstuck and kubectl-nsstuck.

    Ours rather than shtab's (1.13.0, tried on this parser in the real bash and zsh of
    tests/foundation/test_kubectl_plugin.py): its zsh script registers nothing when sourced as the README
    says (`source <(nsstuck completion zsh)`: read as a file, it calls its function at once instead of
    handing it to `compdef`; only `eval` registers it); neither script registers kubectl-nsstuck; its bash one
    offers options only after a `-` (`nsstuck clusters ` gives `check`, not `--help check`), and its
    zsh one offers some options twice. And it is larger: 285 and 458 lines against 64 and 66."""
    table = _completion_table(parser)
    entries = "\n".join(f"    [{json.dumps(key)}]={json.dumps(' '.join(words))}" for key, words in table.items())
    body = f"""_nsstuck_words=(
{entries}
)

_nsstuck() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" path="nsstuck" word i
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word="${{COMP_WORDS[i]}}"
        [[ "$word" == -* ]] && continue
        if [[ -n "${{_nsstuck_words[$path $word]+x}}" ]]; then
            path="$path $word"
        fi
    done
    if [[ "$prev" == -* && -n "${{_nsstuck_words[$path $prev]+x}}" ]]; then
        COMPREPLY=( $(compgen -W "${{_nsstuck_words[$path $prev]}}" -- "$cur") )
        return 0
    fi
    COMPREPLY=( $(compgen -W "${{_nsstuck_words[$path]}}" -- "$cur") )
}}
complete -F _nsstuck nsstuck kubectl-nsstuck
"""
    if shell == "zsh":
        return (
            "#compdef nsstuck kubectl-nsstuck\n"
            "# nsstuck completion for zsh: the bash completion, through zsh's bashcompinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n"
            "typeset -gA _nsstuck_words\n" + body
        )
    return "# nsstuck completion for bash: source <(nsstuck completion bash)\ndeclare -gA _nsstuck_words\n" + body


# ---------------------------------------------------------------------------------------------
# The parser


def _add_output_options(parser: argparse.ArgumentParser, *, schema: str) -> None:
    group = parser.add_argument_group("output")
    group.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml"),
        default="text",
        help=f"text for people (default), or the data as JSON or YAML (schema {schema})",
    )
    group.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


def _emit(ctx: Context, args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    """Print `data` in the format of -o (`text()` for people)."""
    if args.output == "json":
        _write_json(ctx.out, data)
    elif args.output == "yaml":
        import yaml

        ctx.out.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        ctx.out.write(text())


def _write_json(out: TextIO, data: Any) -> None:
    """`data` as `json.dumps(data, indent=2)` writes it, and a newline: written by orjson, whose indented
    output is that text for a document of plain `dict`, `list`, `tuple`, `str`, `int`, `bool` and `None`
    (what every report's `to_json` is made of), once what it leaves unescaped is escaped as the standard
    library escapes it (`_write_ascii`). A document orjson would write otherwise, or refuses, is written by
    the standard library (`_plain` says which): floats (orjson writes NaN and the infinities as null, and
    1e-05 as 0.00001), ints past 64 bits, keys that are not `str`, and subclasses (an enum, an
    OrderedDict). The standard library's own indented encoder has no C speedup: on the 1,000-type
    benchmark's report (12.9 MB) it took 254 ms of CPU against 92 ms for the writer this replaced and
    27 ms for this one, `_plain` included (docs/performance.md; tests/foundation/test_json_output.py)."""
    import orjson

    if _plain(data):
        try:
            raw = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # an int past 64 bits, a key that is not a str: the standard library's text
            pass
        else:
            _write_ascii(out, raw)
            return
    out.write(json.dumps(data, indent=2) + "\n")


def _plain(data: Any) -> bool:
    """Whether `data` holds nothing but `dict`, `list`, `tuple`, `str`, `int`, `bool` and `None`, exactly
    those types: the documents orjson writes as the standard library does (keys are left to orjson,
    which refuses any that is not a `str`)."""
    stack = [data]
    pop, extend = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            continue
        if kind is dict:
            extend(value.values())
        elif kind is list or kind is tuple:
            extend(value)
        else:
            return False
    return True


_UNESCAPED = re.compile("[\x7f-\U0010ffff]")
_ASCII = "".join(map(chr, range(128)))


def _write_ascii(out: TextIO, raw: bytes) -> None:
    """orjson's text, with what it leaves as it is and the standard library escapes (`ensure_ascii`)
    escaped as the standard library escapes it: DEL and every character past ASCII (a surrogate pair past
    the BMP); outside its strings, JSON text holds none of them. Text that needs none of it (a report,
    mostly) goes as the bytes it is to the stream's binary buffer, where it has one that takes ASCII as
    it is (standard output): decoded, it would be as large again at once. On the 1,000-type benchmark's
    report the process's peak RSS was 86 MB so, 111 MB with the text decoded, 74 MB with the writer of
    our own before orjson (which wrote some thousand pieces at a time)."""
    if raw.isascii() and b"\x7f" not in raw:
        buffer = getattr(out, "buffer", None)
        if (
            buffer is not None
            and _ASCII.encode(getattr(out, "encoding", None) or "ascii", "replace") == _ASCII.encode()
        ):
            out.flush()  # what was written before it
            buffer.write(raw)
        else:
            out.write(raw.decode())
        return
    out.write(_UNESCAPED.sub(lambda m: encode_basestring_ascii(m[0])[1:-1], raw.decode()))


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster selection")
    group.add_argument("--cluster", metavar="NAME", help="a cluster registered in the config file")
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="without --cluster: this kubeconfig (default, as kubectl: $KUBECONFIG, else ~/.kube/config)",
    )
    group.add_argument("--context", metavar="NAME", help="the kubeconfig's context (default: its current context)")


def build_parser(prog: str = "nsstuck") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Find out why a Kubernetes namespace is stuck in Terminating, and fix it safely.",
        epilog="Settings come from the environment (NSSTUCK_*, SLACK_*); see the README.",
    )
    parser.add_argument("--version", action="version", version=f"nsstuck {__version__}")
    parser.add_argument(
        "--log-level",
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default: $NSSTUCK_LOG_LEVEL, else INFO for serve and WARNING for the others); "
        "NSSTUCK_LOG_FORMAT=json makes every log line one JSON object",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    serve = commands.add_parser(
        "serve",
        help="run the Slack bot, the scheduler and the health endpoints",
        description="Run the Slack bot (Socket Mode when SLACK_APP_TOKEN is set, otherwise HTTP on "
        "NSSTUCK_HTTP_PORT), the scheduler, /healthz and /readyz, and /metrics on NSSTUCK_METRICS_PORT.",
    )
    serve.set_defaults(handler=cmd_serve)

    diagnose = commands.add_parser(
        "diagnose",
        help="diagnose one namespace and print the report",
        description="Diagnose one namespace: root cause, evidence, blocking objects, ranked remedies. "
        "Exit 0 when a report is produced (whatever it says), 2 on usage or config errors, "
        "3 when the cluster is unreachable or refuses the credentials; with --exit-code 4 when it is stuck.",
    )
    diagnose.add_argument("namespace", metavar="NAMESPACE")
    _add_cluster_options(diagnose)
    _add_output_options(diagnose, schema="nsstuck.diagnosis/v1")
    diagnose.add_argument("--timeout", type=float, default=20.0, metavar="SECONDS", help="overall deadline")
    diagnose.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 4 when the namespace is terminating and a finding blocks it, 0 when it is not stuck "
        "(content still being deleted normally is not stuck); 2 and 3 as always",
    )
    diagnose.set_defaults(handler=cmd_diagnose)

    precheck = commands.add_parser(
        "precheck",
        help="would deleting this Active namespace now get stuck, and why (for pipelines)",
        description="Before `kubectl delete namespace`: say whether deleting this Active namespace now would get "
        "stuck, and why, from the same rules and evidence as diagnose (discovery of every group version, the "
        "webhooks that a DELETE of each object meets, finalizers and their controllers, pods on NotReady nodes, "
        "PVCs in use). Reads only (the read role); changes nothing. Exit 0 nothing would hold the deletion, "
        "4 it would get stuck (the reasons are printed), 5 the evidence is incomplete (never 0 on a gap), "
        "3 the cluster is unreachable or refuses the credentials, 2 on usage or config errors, a namespace "
        "that does not exist, or one already being deleted (use diagnose). "
        "For example: nsstuck precheck preview-123 && kubectl delete ns preview-123",
    )
    precheck.add_argument("namespace", metavar="NAMESPACE")
    _add_cluster_options(precheck)
    _add_output_options(precheck, schema="nsstuck.diagnosis/v1, with its prediction")
    precheck.add_argument("--timeout", type=float, default=20.0, metavar="SECONDS", help="overall deadline")
    precheck.set_defaults(handler=cmd_precheck)

    admission = commands.add_parser(
        "admission",
        help="the namespace-delete admission webhook",
        description="The namespace-delete admission webhook.",
    )
    admission_commands = admission.add_subparsers(dest="admission_command", metavar="COMMAND")
    admission_commands.required = True
    admission_serve = admission_commands.add_parser(
        "serve",
        help="serve the webhook alone for one cluster (no Slack, no database)",
        description="Serve POST /admission/namespaces over TLS for one cluster, with no Slack and no database: "
        "the API server calls it on each namespace DELETE, and it answers with warnings (kubectl prints them) "
        "naming what would hold the namespace, from the same check as precheck. It never refuses a delete "
        "unless --mode deny is chosen. Exit 2 on bad flags or files. See docs/admission.md.",
    )
    admission_serve.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="this kubeconfig (default, as kubectl: $KUBECONFIG, else ~/.kube/config, else in-cluster)",
    )
    admission_serve.add_argument(
        "--context", metavar="NAME", help="the kubeconfig's context (default: its current one)"
    )
    admission_serve.add_argument("--cert", required=True, metavar="FILE", help="the serving certificate (PEM)")
    admission_serve.add_argument("--key", required=True, metavar="FILE", help="its private key (PEM)")
    admission_serve.add_argument("--port", type=int, default=8443, metavar="N", help="the TLS port (default 8443)")
    admission_serve.add_argument(
        "--address",
        default="0.0.0.0",  # noqa: S104 (a webhook is called by the API server, from outside the pod)
        metavar="ADDRESS",
        help="the address to listen on (default 0.0.0.0)",
    )
    admission_serve.add_argument(
        "--budget",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="the time the check of one delete may take, at most 28 (default 3); the answer comes within it",
    )
    admission_serve.add_argument(
        "--mode",
        choices=["warn", "deny"],
        default="warn",
        help="warn (default): always allow, with warnings; deny: refuse a delete that would certainly get stuck",
    )
    admission_serve.set_defaults(handler=cmd_admission_serve, cluster=None)

    db = commands.add_parser("db", help="database schema migrations", description="Database schema migrations.")
    db_commands = db.add_subparsers(dest="db_command", metavar="ACTION")
    db_commands.required = True
    upgrade = db_commands.add_parser(
        "upgrade",
        help="apply migrations to NSSTUCK_DATABASE_URL (or NSSTUCK_MIGRATION_DATABASE_URL)",
        description="Apply Alembic migrations, as NSSTUCK_MIGRATION_DATABASE_URL's role when it is set (else "
        "NSSTUCK_DATABASE_URL's); with two PostgreSQL roles, then grant the runtime role (NSSTUCK_DATABASE_URL's "
        "user, or NSSTUCK_DATABASE_RUNTIME_ROLE) what nsstuck serve needs of each table, and no more.",
    )
    upgrade.add_argument("--revision", default="head", help="target revision (default: head)")
    upgrade.set_defaults(handler=cmd_db_upgrade)
    downgrade = db_commands.add_parser(
        "downgrade", help="revert migrations", description="Revert Alembic migrations down to REVISION."
    )
    downgrade.add_argument("revision", metavar="REVISION", help="target revision, or 'base' for an empty schema")
    downgrade.set_defaults(handler=cmd_db_downgrade)
    current = db_commands.add_parser(
        "current", help="show the schema revision", description="Show the revision; exit 1 if not at head."
    )
    _add_output_options(current, schema="nsstuck.db/v1")
    current.set_defaults(handler=cmd_db_current)

    history = commands.add_parser("history", help="list incidents", description="List incidents, open first.")
    history.add_argument("--cluster", metavar="NAME")
    history.add_argument("--namespace", metavar="NAME")
    history.add_argument("--open", action="store_true", help="only open incidents")
    history.add_argument("--cause", metavar="CAUSE", help="only incidents of this cause (contract §2's causes)")
    _add_output_options(history, schema="nsstuck.history/v1")
    history.add_argument("--limit", type=int, default=20, metavar="N", help="at most N incidents (default 20)")
    history.set_defaults(handler=cmd_history)

    digest = commands.add_parser("digest", help="scheduled digests", description="Scheduled digests.")
    digest_commands = digest.add_subparsers(dest="digest_command", metavar="ACTION")
    digest_commands.required = True
    digest_run = digest_commands.add_parser(
        "run", help="build and post a digest now", description="Build and post the digest now."
    )
    digest_run.add_argument("--channel", metavar="ID", help="the digest's channel (default: every digest)")
    digest_run.add_argument("--dry-run", action="store_true", help="print the digest instead of posting it")
    _add_output_options(digest_run, schema="nsstuck.digest/v1, with --dry-run")
    digest_run.set_defaults(handler=cmd_digest_run)

    audit = commands.add_parser(
        "audit",
        help="the remediation audit trail and backups",
        description="The audit trail: every remediation request, vote, backup, dry run and change, in an "
        "append-only, hash-chained log (NSSTUCK_DATABASE_URL, migrated).",
    )
    audit_commands = audit.add_subparsers(dest="audit_command", metavar="ACTION")
    audit_commands.required = True
    export = audit_commands.add_parser(
        "export",
        help="export the audit trail (JSON or CSV)",
        description="Write the audit trail to stdout in seq order, streamed: --json (the default) one "
        'document {"schema": "nsstuck.audit/v1", "head": {"seq", "hash"}, "entries": [...]}, each entry '
        "with seq, at, event, actor, cluster, namespace, request_id, objects, details, prev_hash, hash; "
        "--csv a header and one row per entry, objects and details as compact JSON. An entry's hash is "
        "sha256 of the compact, key-sorted JSON of its other fields, so an export can be re-checked "
        "anywhere. Entries appended while exporting are left out; the JSON also says when it was taken "
        "(exported_at). Keep the hashes outside the database: the chain alone cannot show entries cut "
        "off its end or a consistent rewrite (its hash has no key), a hash kept elsewhere can. Ship an "
        "export on a schedule to storage its owners cannot rewrite (for example object storage with a "
        "retention lock); its head.hash (in CSV the last row's hash) is what `nsstuck audit verify "
        "--expect-head HASH` checks the chain against later. Each remediation's outcome message in its "
        "Slack thread is one more copy (audit #SEQ and the first 12 hex digits of that entry's hash).",
    )
    fmt = export.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON document (the default)")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row")
    fmt.add_argument("-o", "--output", choices=("json", "csv"), help="the same as --json or --csv")
    export.add_argument(
        "--since",
        metavar="ISO-TIME",
        help="only entries at or after this time (e.g. 2026-11-21T10:00:00Z; UTC if no zone)",
    )
    export.add_argument("--request", type=int, metavar="ID", help="only the entries of this remediation request")
    export.set_defaults(handler=cmd_audit_export)
    verify = audit_commands.add_parser(
        "verify",
        help="verify the hash chain and the backups",
        description="Walk the hash chain from the start to the head and report each entry that was "
        "changed, is missing or is out of order, a removed tail and an edited head; check that every "
        "backup still matches its sha256 and the sha256 the trail recorded. The chain alone cannot show "
        "entries cut off its end with the head moved back, or a whole chain rewritten (its hash has no "
        "key): --expect-head checks it against a hash kept elsewhere. Exit 0 intact (and the expected "
        "entry in the chain), 1 tampered or the expected entry missing or behind a break, 2 on a usage "
        "error or when the database is not migrated.",
    )
    verify.add_argument(
        "--expect-head",
        metavar="HASH",
        help="a hash kept outside the database: an outcome message's in Slack (its 12 hex digits), or an "
        "export's head.hash; a full hash or a prefix of at least 12 hex digits, any case. The chain must "
        "hold an entry with it and be unbroken up to it (a prefix that several entries share counts "
        "as found, and the chain must be unbroken up to the last of them)",
    )
    _add_output_options(verify, schema="nsstuck.audit-verify/v1")
    verify.set_defaults(handler=cmd_audit_verify)

    backup = commands.add_parser(
        "backup",
        help="objects saved before a remediation changed them",
        description="Backups: each object as it was read right before nsstuck changed it.",
    )
    backup_commands = backup.add_subparsers(dest="backup_command", metavar="ACTION")
    backup_commands.required = True
    show = backup_commands.add_parser(
        "show",
        help="print a backup as YAML",
        description="Print backup ID as YAML, after comment lines naming the object, cluster, request, "
        "when it was taken and its sha256, and whether the stored object still matches it. Without "
        "--raw the fields the API server sets (uid, resourceVersion, creationTimestamp, generation, "
        "managedFields, selfLink, deletionTimestamp, deletionGracePeriodSeconds, status) are left out, "
        "so `kubectl create -f` recreates the object. Exit 0, 1 when the backup no longer matches its "
        "sha256 (it is printed all the same), 2 when there is no such backup.",
    )
    show.add_argument(
        "id", type=int, metavar="ID", help="the backup's id (the audit trail's backed_up entries list them)"
    )
    show.add_argument("--raw", action="store_true", help="the object exactly as it was read")
    show.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="YAML after the comment lines (default), or the object alone as JSON",
    )
    show.set_defaults(handler=cmd_backup_show)

    clusters = commands.add_parser("clusters", help="registered clusters", description="Registered clusters.")
    clusters_commands = clusters.add_subparsers(dest="clusters_command", metavar="ACTION")
    clusters_commands.required = True
    check = clusters_commands.add_parser(
        "check",
        help="check reachability, identity and permissions of every registered cluster",
        description="For each registered cluster (or --cluster NAME; with no cluster registered, or with "
        "--kubeconfig or --context, the cluster kubectl would use, for its read role): whether nsstuck "
        "reaches it (and why not), the server version, who nsstuck is there (SelfSubjectReview; unknown "
        "where the server lacks it), whether it serves aggregated discovery, and every permission nsstuck needs there, "
        "asked with SelfSubjectAccessReview: the read role, the remediation role where remediation is on, "
        "impersonation where act_as_approver is on; list and get on every type are asked per namespaced "
        "type the cluster serves. Exit 0 all granted, 1 a permission missing (named verb resource.group), "
        "3 a cluster unreachable (3 wins over 1), 2 on a usage or config error.",
    )
    _add_cluster_options(check)
    check.add_argument("--config", type=Path, metavar="PATH", help="the config file (default: $NSSTUCK_CONFIG)")
    check.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="per call (default 10)")
    _add_output_options(check, schema="nsstuck.clusters/v1")
    check.set_defaults(handler=cmd_clusters_check)

    mcp = commands.add_parser(
        "mcp",
        help="serve read-only tools to agents over MCP (stdio, or HTTP with bearer tokens)",
        description="An MCP server for agents: the read-only tools list_clusters, diagnose, precheck, history and "
        "explain over the config's clusters. Over stdio (the default) every cluster of the config; with --http "
        "PORT over streamable HTTP at /mcp, where each request needs a bearer token of the config's mcp.tokens "
        "and sees only that token's clusters. No tool changes a cluster. Exit 0 on a clean shutdown, 2 on a "
        "usage or config error.",
    )
    mcp.add_argument("--config", type=Path, metavar="PATH", help="the config file (default: $NSSTUCK_CONFIG)")
    mcp.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on this port (0: any free one)")
    mcp.add_argument(
        "--address", default="127.0.0.1", metavar="ADDR", help="with --http: the address (default 127.0.0.1)"
    )
    mcp.set_defaults(handler=cmd_mcp)

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for nsstuck and kubectl-nsstuck: in bash, "
        "`source <(nsstuck completion bash)` (or save it in /etc/bash_completion.d/); in zsh, "
        "`source <(nsstuck completion zsh)` in ~/.zshrc (it uses zsh's bashcompinit).",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(handler=cmd_completion)

    config = commands.add_parser("config", help="the config file", description="The config file.")
    config_commands = config.add_subparsers(dest="config_command", metavar="ACTION")
    config_commands.required = True
    config_check = config_commands.add_parser(
        "check",
        help="validate the environment and the config file",
        description="Validate the environment and the config file, and report every problem at once (an "
        "unknown key with the nearest known one); say when there is no config file and which Slack "
        "variables nsstuck serve would miss. Exit 0 valid, 2 invalid.",
    )
    config_check.add_argument("--config", type=Path, metavar="PATH", help="the file (default: $NSSTUCK_CONFIG)")
    _add_output_options(config_check, schema="nsstuck.config-check/v1")
    config_check.set_defaults(handler=cmd_config_check)
    return parser


def _set_up_logging(args: argparse.Namespace, err: TextIO) -> None:
    """--log-level, NSSTUCK_LOG_LEVEL, NSSTUCK_LOG_FORMAT (bot.logs): serve says what it does at INFO."""
    from bot import logs

    try:
        level, fmt = logs.resolve(
            os.environ,
            flag=args.log_level,
            default_level="INFO" if args.command in ("serve", "admission", "mcp") else "WARNING",
        )
    except logs.LogSettingError as e:
        raise ConfigError("environment", e.variable, str(e)) from None
    logs.setup(level, fmt, err)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    # as a kubectl plugin (`kubectl nsstuck ...` runs kubectl-nsstuck), usage says so
    invoked = Path(sys.argv[0]).name if sys.argv else ""
    parser = build_parser("kubectl nsstuck" if invoked == "kubectl-nsstuck" else "nsstuck")
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        _set_up_logging(args, err)
        # the files the kubernetes client writes for a kubeconfig's inline credentials go in a directory of
        # this command's own, removed when it ends (the client's own clean-up runs only at interpreter exit)
        with clientfiles.private():
            return handler(args, Context(args, out, err))
    except ConfigError as e:
        print(f"nsstuck: config error: {e}", file=err)
        return e.exit_code
    except NsstuckError as e:
        print(f"nsstuck: {e}", file=err)
        return e.exit_code
    except KeyboardInterrupt:
        print("nsstuck: interrupted", file=err)
        return 130
