"""The dead-letter subscription: what the push subscriptions gave up on, pulled for a replay."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import google.cloud.pubsub_v1 as pubsub_v1

from adapters.bus.topology import clients

PULL_BATCH = 100
# Pub/Sub holds a pull open until a message comes or its deadline nears, so the last, empty pull
# of a drain costs its whole wait: the first pull waits long enough to find what the box holds;
# once letters have come, a shorter wait that stays empty means the box is drained.
FIRST_WAIT_SECONDS = 10.0
NEXT_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class DeadLetter:
    ack_id: str
    message_id: str
    data: bytes
    attributes: dict[str, str]


class DeadLetterBox:
    """Pulls every message the dead-letter subscription holds; each stays leased until settled."""

    def __init__(self, subscriber: pubsub_v1.SubscriberClient, subscription: str) -> None:
        self._subscriber = subscriber
        self._subscription = subscription

    def pull_all(self) -> list[DeadLetter]:
        """Pull until a pull comes back empty (leased messages are not handed out twice)."""
        found: list[DeadLetter] = []
        wait = FIRST_WAIT_SECONDS
        while batch := self._pull(wait):
            found.extend(batch)
            wait = NEXT_WAIT_SECONDS
        return found

    def _pull(self, wait: float) -> list[DeadLetter]:
        response = self._subscriber.pull(
            request={"subscription": self._subscription, "max_messages": PULL_BATCH}, timeout=wait
        )
        return [
            DeadLetter(
                ack_id=received.ack_id,
                message_id=received.message.message_id,
                data=bytes(received.message.data),
                attributes=dict(received.message.attributes),
            )
            for received in response.received_messages
        ]

    def acknowledge(self, letters: list[DeadLetter]) -> None:
        """Remove them: they are back on the topic."""
        if letters:
            ack_ids = [letter.ack_id for letter in letters]
            self._subscriber.acknowledge(
                request={"subscription": self._subscription, "ack_ids": ack_ids}
            )

    def release(self, letters: list[DeadLetter]) -> None:
        """Leave them where they are, available again at once (a dry run)."""
        if letters:
            self._subscriber.modify_ack_deadline(
                request={
                    "subscription": self._subscription,
                    "ack_ids": [letter.ack_id for letter in letters],
                    "ack_deadline_seconds": 0,
                }
            )


@contextmanager
def dead_letter_box(
    *, project: str, topic: str, emulator_host: str | None
) -> Iterator[DeadLetterBox]:
    """The box behind `<topic>-dead-letter`, the subscription topology and cloudbuild.yaml make."""
    with clients(emulator_host) as (_, subscriber):
        path = f"projects/{project}/subscriptions/{topic}-dead-letter"
        yield DeadLetterBox(subscriber, path)
