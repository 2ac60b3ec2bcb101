"""A workflow runner, and its instances, that hand everything to another runner's: the base of
tempi's runners that change one thing about the sandbox's (workflow_runner.py,
doorbell_runner.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.workflow import Info

if TYPE_CHECKING:
    # The SDK's own names for what its runner interface passes; private, so types only.
    from temporalio.worker._command_aware_visitor import CommandInfo
    from temporalio.workflow import _Definition


class WrappedRunner(WorkflowRunner):
    """`inner`, with each instance wrapped by `wrap`."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def wrap(self, instance: WorkflowInstance, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return instance

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return self.wrap(self.inner.create_instance(det), det)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


class WrappedInstance(WorkflowInstance):
    """`inner`, as it is; subclasses override what they change."""

    def __init__(self, inner: WorkflowInstance) -> None:
        self.inner = inner

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self.inner.activate(act)

    def get_serialization_context(self, command_info: CommandInfo | None) -> SerializationContext | None:
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: CommandInfo | None) -> StorageDriverStoreContext:
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> Info:
        return self.inner.get_info()

    def get_thread_id(self) -> int | None:
        return self.inner.get_thread_id()
