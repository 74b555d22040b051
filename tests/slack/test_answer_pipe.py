"""What the bot reads from a diagnosis worker's pipe (`receive_answer`), written byte by byte as a broken
or hostile worker would: the bot takes only a whole answer, of an allowed size, in time, of the right
type, and says which it was not. (tests/slack/test_worker_bounds.py stops real workers mid-answer.)"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import struct
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from bot.services.working import AnswerRefusedError, receive_answer

LENGTH = struct.Struct("!Q")  # the length that starts an answer on the pipe


@pytest.fixture
def pipe() -> Iterator[tuple[Connection, Connection]]:
    reader, writer = multiprocessing.Pipe(duplex=False)
    try:
        yield reader, writer
    finally:
        reader.close()
        if not writer.closed:
            writer.close()


def _write(writer: Connection, data: bytes) -> None:
    """Raw bytes on the pipe's descriptor, as `send_answer` writes them."""
    os.write(writer.fileno(), data)


def test_a_worker_gone_before_its_answer_or_after_its_length_gives_nothing(pipe: tuple[Connection, Connection]) -> None:
    reader, writer = pipe
    writer.close()
    assert receive_answer(reader, max_bytes=1 << 20, seconds=1) is None


def test_an_answer_cut_after_its_length_gives_nothing(pipe: tuple[Connection, Connection]) -> None:
    reader, writer = pipe
    _write(writer, LENGTH.pack(100))
    writer.close()
    assert receive_answer(reader, max_bytes=1 << 20, seconds=1) is None


def test_an_answer_longer_than_allowed_is_refused_unread(pipe: tuple[Connection, Connection]) -> None:
    reader, writer = pipe
    _write(writer, LENGTH.pack(5 << 20))
    with pytest.raises(AnswerRefusedError) as refused:
        receive_answer(reader, max_bytes=1 << 20, seconds=1)
    assert refused.value.too_large
    assert "5.0 MB, more than the 1.0 MB allowed" in str(refused.value)


def test_an_answer_that_stops_arriving_is_refused_at_its_deadline(pipe: tuple[Connection, Connection]) -> None:
    reader, writer = pipe
    _write(writer, LENGTH.pack(1000) + b"x" * 10)
    with pytest.raises(AnswerRefusedError) as refused:
        receive_answer(reader, max_bytes=1 << 20, seconds=0.2)
    assert "10 bytes of 1000 bytes came in 0.2s" in str(refused.value)


def test_a_length_that_stops_arriving_is_refused_at_its_deadline(pipe: tuple[Connection, Connection]) -> None:
    reader, writer = pipe
    _write(writer, b"\x00\x00")
    with pytest.raises(AnswerRefusedError, match="stopped arriving before its length"):
        receive_answer(reader, max_bytes=1 << 20, seconds=0.2)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"not a pickle at all", "could not be read (UnpicklingError)"),
        (pickle.dumps({"value": None}), "sent a dict instead of an answer"),
    ],
)
def test_an_answer_that_is_not_one_is_refused(pipe: tuple[Connection, Connection], body: bytes, said: str) -> None:
    reader, writer = pipe
    _write(writer, LENGTH.pack(len(body)) + body)
    with pytest.raises(AnswerRefusedError) as refused:
        receive_answer(reader, max_bytes=1 << 20, seconds=1)
    assert said in str(refused.value)
