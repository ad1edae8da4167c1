"""Horovod's horovod.common.exceptions, where Horovod's scripts import its exceptions from
(`from horovod.common.exceptions import HorovodInternalError`): kolo.common.errors' classes,
the ones every kolo binding raises."""

from kolo.common.errors import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt"]
