"""Who may use the bot, where, and who may stop other people's runs (beyond mom, which lets
anyone in a channel it is in run commands)."""

from __future__ import annotations

from dataclasses import dataclass, field


def parse_names(value: str | None) -> frozenset[str]:
    """`--allow-users alice,U0123` style lists; channel names may keep their `#`."""
    if not value:
        return frozenset()
    return frozenset(part.strip().lstrip("#@") for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class Access:
    users: frozenset[str] = field(default_factory=frozenset)
    channels: frozenset[str] = field(default_factory=frozenset)
    admins: frozenset[str] = field(default_factory=frozenset)

    def user_allowed(self, user_id: str, user_name: str) -> bool:
        # Admins are let in even when the allow-list forgets them.
        return not self.users or bool({user_id, user_name} & (self.users | self.admins))

    def channel_allowed(self, channel_id: str, channel_name: str | None) -> bool:
        return not self.channels or bool({channel_id, channel_name} & self.channels)

    def is_admin(self, user_id: str, user_name: str) -> bool:
        """Without --admins everyone may stop any run, as in mom."""
        return not self.admins or bool({user_id, user_name} & self.admins)
