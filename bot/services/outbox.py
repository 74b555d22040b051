"""The outbox: recorded diagnosis runs are published once, whatever happens to the door in between.

A run is committed before anything is posted (`recording.record`). Publishing it claims the next
attempt in the database (so that two workers or replicas never post it at once), posts the verdict in
the incident's thread (or starts that thread), then the report in it; a failed attempt is recorded and
the scheduled job (`repost_pending`) tries again. Runs of one incident are published one after the
other in this process, so that the first verdict's thread is known before the next one picks a place.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from bot.domain.findings import Diagnosis
from bot.services.notifying import RunAttempt, RunPublisher
from bot.services.recording import (
    PendingPost,
    attach_thread,
    claim_post,
    current_thread,
    mark_post_failed,
    mark_posted,
    pending_post,
    unposted_runs,
)
from bot.store.database import Database

log = logging.getLogger(__name__)
# a run asked by a person in Slack (the watch's and the admission webhook's runs are not any one person's)
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")


class Outbox:
    def __init__(
        self,
        db: Database,
        publisher: RunPublisher,
        *,
        remediable: Callable[[str, str], bool],
        shown: Callable[[Diagnosis, str], Diagnosis] | None = None,
    ) -> None:
        """`remediable(cluster, channel)`: whether its reports carry Request buttons in that channel.
        `shown(report, slack_user)`: the report as the person who asked is shown it (`diagnose_as:
        requester`, bot.services.tenancy); the run recorded stays whole."""
        self.shown = shown
        self.db = db
        self.publisher = publisher
        self.remediable = remediable
        self._incident_locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def deliver(self, run_id: int) -> bool:
        """Post a recorded run (verdict, then its report in the incident's thread); True once posted."""
        pending = pending_post(self.db, run_id)
        if pending is None or not claim_post(self.db, run_id, pending.attempts):
            return False  # posted already, or another worker or replica is posting it
        try:
            if self.shown is not None and _SLACK_USER.match(pending.requested_by):
                pending = replace(pending, diagnosis=self.shown(pending.diagnosis, pending.requested_by))
        except Exception as e:  # the cluster did not answer the reviews: nothing is posted unjudged
            log.warning("judging what run %s may show failed (%s); it will be retried", run_id, e)
            mark_post_failed(self.db, run_id, f"{e.__class__.__name__}: {e}")
            return False
        attempt = self.publisher.attempt(pending)
        try:
            self._publish(pending, attempt)
        except Exception as e:  # the edge of one delivery: Slack refused or is down; the run stays in the outbox
            log.warning("posting run %s to %s failed (%s); it will be retried", run_id, pending.channel, e)
            attempt.failed()
            mark_post_failed(self.db, run_id, f"{e.__class__.__name__}: {e}")
            return False
        attempt.posted()
        mark_posted(self.db, run_id, datetime.now(UTC))
        return True

    def repost_pending(self) -> int:
        """Post every run whose posting failed or never happened, and what else the publisher kept
        (notes, request messages); the scheduler calls this."""
        delivered = 0
        for run_id in unposted_runs(self.db, now=datetime.now(UTC)):
            delivered += self.deliver(run_id)
        return delivered + self.publisher.retry_kept()

    def _publish(self, pending: PendingPost, attempt: RunAttempt) -> None:
        if pending.incident_id is None:  # active or gone: no incident, no thread of its own
            posted = attempt.verdict(None)
            prediction = pending.diagnosis.prediction
            if prediction is not None and (prediction.findings or prediction.gaps):
                # an Active namespace's predicted reasons go in the verdict's thread; they offer no request
                # (nothing is deleted yet), whatever the cluster allows
                if posted is None:
                    raise LookupError("the verdict's post came back without a ts to start the thread with")
                attempt.report(posted, remediable=False)()
            return
        with self._incident_lock(pending.incident_id):
            existing = current_thread(self.db, pending.incident_id)
            thread = existing[1] if existing and existing[0] == pending.channel else None
            posted = attempt.verdict(thread)
            if thread is None:
                if posted is None:
                    raise LookupError("the verdict's post came back without a ts to start the thread with")
                channel, thread = attach_thread(self.db, pending.incident_id, pending.channel, posted)
                if channel != pending.channel:
                    # the incident lives in another channel's thread (asked there first): this channel's
                    # report goes under the verdict just posted here, not under a ts of another channel
                    thread = posted
            wait = attempt.report(thread, remediable=self.remediable(pending.diagnosis.cluster, pending.channel))
        wait()

    def _incident_lock(self, incident_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._incident_locks.setdefault(incident_id, threading.Lock())
