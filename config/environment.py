"""APP_ENV: the one setting every group's checks consult, so every group extends this."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Environment(BaseModel):
    app_env: Literal["development", "test", "production"] = "development"

    @property
    def is_production(self) -> bool:
        return self.app_env == "production"
