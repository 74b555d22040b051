"""Posting a message once, when Slack's answer can be lost.

A post that timed out, or whose connection dropped after it was sent, may have been posted all the
same: Slack finishes what it has started. A blind retry then posts it twice. So each post carries a
key in its message metadata (`event_type` nsstuck_post, `event_payload.key`), and a post that may have
gone through is looked for (conversations.history, or conversations.replies in a thread, with
include_all_metadata) before it is sent again:

- found: it is posted; its `ts` is the answer;
- not found, and Slack had answered (a 500: whatever it did is done): it is sent again;
- not found, and Slack had not answered: it may still be under way, so it is looked for again until
  NSSTUCK_SLACK_SETTLE_SECONDS after it was sent, and only then sent again.

A 429, or a connection that could not be opened or written, means Slack did not take the post: it is
simply sent again. Only if Slack cannot be asked (no `channels:history` scope, say) is it sent again
unseen, as before, with a warning.

Work that still fails after the pacer's retries is kept in a `Backlog` and tried again by the outbox
job, with the same key, so that a note said while Slack was down arrives once when it is back.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.services.metrics import Metrics
from bot.slack.blocks import Message
from bot.slack.pacing import RateLimited, Transient, Unsettled

log = logging.getLogger(__name__)

EVENT_TYPE = "nsstuck_post"
# Slack's clock and ours may differ: a copy is looked for from this long before the post was made
CLOCK_MARGIN = 120.0
PAGE = 200
MAX_PAGES = 10


@dataclass
class Post:
    """One message to post, and what is known of earlier attempts to post it."""

    channel: str
    message: Message
    thread_ts: str | None
    key: str
    oldest: float  # epoch seconds: no copy of this message in Slack is older
    in_doubt: bool = False  # an earlier attempt may have gone through
    settle_at: float = 0.0  # epoch seconds: by then, an attempt still under way at Slack has landed

    def metadata(self) -> dict[str, Any]:
        return {"event_type": EVENT_TYPE, "event_payload": {"key": self.key}}

    def doubt(self, *, until: float) -> None:
        self.in_doubt = True
        self.settle_at = max(self.settle_at, until)


def message_key() -> str:
    """A key for a one-off message (a note, a request): retries of it carry the same one."""
    return f"msg:{uuid.uuid4().hex}"


class Poster:
    """Sends `Post`s with chat.postMessage (called by the pacer, which retries what this raises)."""

    def __init__(
        self,
        client: WebClient,
        *,
        settle: float,
        bot_id: Callable[[], str | None],
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.settle = settle
        self.bot_id = bot_id
        self.metrics = metrics
        self.clock = clock
        self._unseen_warned = False

    def prepare(
        self,
        channel: str,
        message: Message,
        *,
        thread_ts: str | None = None,
        key: str | None = None,
        oldest: float | None = None,
    ) -> Post:
        now = self.clock()
        return Post(channel, message, thread_ts, key or message_key(), (oldest or now) - CLOCK_MARGIN)

    def send(self, post: Post) -> dict[str, Any]:
        if post.in_doubt:
            found = self.find(post)
            if found is not None:
                post.in_doubt = False
                log.info("a post to %s had gone through after all (%s); not sent again", post.channel, post.key)
                self.metrics.posts.labels(result="found").inc()
                return found
            now = self.clock()
            if now < post.settle_at:  # not there yet, but it may still be under way: look again later
                raise Unsettled(min(post.settle_at - now, max(0.5, (now - (post.settle_at - self.settle)) / 2)))
            post.in_doubt = False  # nothing of the earlier attempts came through
        sent = self.clock()
        try:
            response = self.client.chat_postMessage(
                channel=post.channel,
                text=post.message.text,
                blocks=list(post.message.blocks),
                thread_ts=post.thread_ts,
                metadata=post.metadata(),
                # its links are to threads and runbooks: a preview of each would bury the message
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as e:
            paced = pace_error(e)
            if isinstance(paced, Transient):  # Slack answered 5xx: whatever it did of the post is done
                post.doubt(until=self.clock())
            if paced is not None:  # a 429 was refused: not posted
                raise paced from None
            log.error("chat.postMessage to %s failed: %s", post.channel, e.response.get("error"))
            self.metrics.posts.labels(result="error").inc()
            raise
        except URLError as e:  # no connection, or the request could not be written: not posted
            raise Transient(f"{e.__class__.__name__}: {e.reason.__class__.__name__}") from None
        except OSError as e:  # sent, but no answer (a timeout, a dropped connection): maybe posted
            post.doubt(until=sent + self.settle)
            raise Transient(e.__class__.__name__) from None
        self.metrics.posts.labels(result="ok").inc()
        return dict(response.data) if isinstance(response.data, dict) else {}

    # -- looking for a post ----------------------------------------------------------------------

    def find(self, post: Post) -> dict[str, Any] | None:
        """The message posted under `post.key`, as chat.postMessage would have answered; None if absent."""
        try:
            bot_id = self.bot_id()
            for message in self._messages(post):
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                if (
                    metadata.get("event_type") == EVENT_TYPE
                    and payload.get("key") == post.key
                    and (bot_id is None or message.get("bot_id") == bot_id)
                ):
                    return {"ok": True, "channel": post.channel, "ts": message.get("ts"), "message": message}
        except SlackApiError as e:
            paced = pace_error(e, doing="looking for a post: ")
            if paced is not None:
                raise paced from None
            if e.response.get("error") == "thread_not_found":
                return None
            if not self._unseen_warned:  # no channels:history scope, say: posting unseen, as before
                log.warning(
                    "cannot look for posts that may have gone through in %s (%s); a retry may post twice",
                    post.channel,
                    e.response.get("error"),
                )
                self._unseen_warned = True
            return None
        except OSError as e:
            raise Transient(f"looking for a post: {e.__class__.__name__}") from None
        return None

    def _messages(self, post: Post) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            if post.thread_ts:  # the thread, its first message included
                response = self.client.conversations_replies(
                    channel=post.channel, ts=post.thread_ts, include_all_metadata=True, limit=PAGE, cursor=cursor
                )
            else:
                response = self.client.conversations_history(
                    channel=post.channel,
                    oldest=f"{post.oldest:.6f}",
                    include_all_metadata=True,
                    limit=PAGE,
                    cursor=cursor,
                )
            yield from response.get("messages") or ()
            cursor = str((response.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                return


def pace_error(error: SlackApiError, *, doing: str = "") -> RateLimited | Transient | None:
    """What Slack's error means to the pacer: wait and send again (429), send again (5xx), or None:
    a refusal that sending again would not change."""
    status = error.response.status_code
    if status == 429:
        return RateLimited(retry_after(error))
    if status >= 500:
        return Transient(f"{doing}HTTP {status}")
    return None


def retry_after(error: SlackApiError) -> float:
    headers = error.response.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return float(value) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


class Backlog:
    """Slack work that failed after the pacer's retries, kept in memory and tried again by the outbox
    job until it succeeds or `max_age` passes. One entry per key: a second `keep` of a key is ignored."""

    def __init__(self, *, max_age: float = 24 * 3600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.clock = clock
        self._items: dict[str, tuple[float, Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._running = threading.Lock()

    def keep(self, key: str, work: Callable[[], None]) -> None:
        with self._lock:
            self._items.setdefault(key, (self.clock(), work))

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def retry(self) -> int:
        """Try what is kept, oldest first, until something fails again as Slack fails (the rest waits for
        the next pass); returns how many succeeded. Work Slack refuses for good (an archived channel,
        say) is dropped, and so is work kept longer than `max_age`."""
        if not self._running.acquire(blocking=False):
            return 0  # a pass is under way already
        try:
            with self._lock:
                items = list(self._items.items())
            done = 0
            for key, (since, work) in items:
                try:
                    work()
                except (Transient, RateLimited) as e:
                    age = self.clock() - since
                    if age <= self.max_age:
                        log.warning("%s still fails (%s); kept", key, e)
                        return done
                    log.error("giving up on %s, kept for %.0fs: %s", key, age, e)
                except Exception as e:
                    log.error("giving up on %s: %s", key, e.__class__.__name__)
                else:
                    done += 1
                with self._lock:
                    self._items.pop(key, None)
            return done
        finally:
            self._running.release()
