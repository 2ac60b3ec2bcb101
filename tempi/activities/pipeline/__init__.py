"""The pipeline workflow's activities: git worktrees, the spec's commands, integration."""

from tempi.activities.pipeline.activities import PIPELINE_ACTIVITIES

__all__ = ["PIPELINE_ACTIVITIES"]
