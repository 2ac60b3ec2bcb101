"""Which thread replies steer a run: a picture posted alone in the bot's thread counts."""

from __future__ import annotations

from tempi.slack.accept import thread_reply

BOT = "B0BOT"


def reply(text: str, **extra: object) -> dict[str, object]:
    return {
        "type": "message",
        "channel": "C0GENERAL",
        "channel_type": "channel",
        "user": "U0ALICE",
        "ts": "1700000002.000100",
        "thread_ts": "1700000001.000100",
        "text": text,
        **extra,
    }


def test_an_image_posted_alone_in_the_thread_is_a_reply_but_an_empty_message_is_not() -> None:
    files = [{"id": "F0PIC", "name": "dot.png", "mimetype": "image/png"}]
    accepted = thread_reply(reply("", subtype="file_share", files=files), BOT)
    assert accepted is not None and accepted.thread_ts == "1700000001.000100"
    assert thread_reply(reply("  "), BOT) is None
    assert thread_reply(reply(f"<@{BOT}> hi"), BOT) is None
