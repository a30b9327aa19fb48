"""The protocol's enumerations: message types, codes, statuses, modes, flags.

Every value is the one ``wire/PROTOCOL.md`` gives; the conformance vectors
name codes and statuses by these names.
"""

import enum

__all__ = [
    "MessageType", "Code", "Status", "Mode", "Flag", "PARTIAL",
    "CLOSING_CODES",
]


class MessageType(enum.IntEnum):
    """A frame's type. An answer's type is its request's with ``ANSWER``."""

    HELLO = 0x0001
    PING = 0x0002
    STATS = 0x0003
    RESERVE_WRITE = 0x0010
    FINISH_WRITE = 0x0011
    ABORT_WRITE = 0x0012
    FINISH_WRITE_AND_RESERVE_READ = 0x0013
    RESERVE_READ = 0x0014
    RESERVE_READ_PREFIX = 0x0015
    FINISH_READ = 0x0016
    DELETE = 0x0017
    TOUCH = 0x0018
    #: How much of a prompt L1 and L2 hold; with ``Flag.PREFETCH`` it
    #: starts loading the L2 part into L1.
    LOOKUP = 0x0019
    #: reserve_read_prefix after waiting (``size`` microseconds at most)
    #: for the daemon's prefetch of the keys.
    RESERVE_READ_PREFIX_WAIT = 0x001A
    #: The bit that marks an answer, and the error answer's whole type.
    ANSWER = 0x8000

    @property
    def wire_name(self) -> str:
        """The name the vectors use: ``"reserve_write"``, ``"error"``."""
        return "error" if self is MessageType.ANSWER else self.name.lower()

    @property
    def keyed(self) -> bool:
        """Whether requests of this type carry keys."""
        return (MessageType.RESERVE_WRITE <= self
                <= MessageType.RESERVE_READ_PREFIX_WAIT)

    @property
    def has_leases(self) -> bool:
        """Whether requests of this type carry one lease per key."""
        return self in _WITH_LEASES

    @property
    def by_handle(self) -> bool:
        """Whether requests of this type may name records by handle
        (version 2, ``Flag.HANDLES``)."""
        return self in _BY_HANDLE

    @property
    def has_results(self) -> bool:
        """Whether answers carry a result (status, block, lease) per key."""
        return self in _WITH_RESULTS

    @property
    def has_statuses(self) -> bool:
        """Whether answers carry a status per key."""
        return self in _WITH_STATUSES


_WITH_LEASES = frozenset({
    MessageType.FINISH_WRITE, MessageType.ABORT_WRITE,
    MessageType.FINISH_WRITE_AND_RESERVE_READ, MessageType.FINISH_READ,
})
_BY_HANDLE = frozenset({
    MessageType.FINISH_WRITE, MessageType.ABORT_WRITE,
    MessageType.FINISH_WRITE_AND_RESERVE_READ, MessageType.FINISH_READ,
    MessageType.DELETE,
})
_WITH_RESULTS = frozenset({
    MessageType.RESERVE_WRITE, MessageType.FINISH_WRITE_AND_RESERVE_READ,
    MessageType.RESERVE_READ, MessageType.RESERVE_READ_PREFIX,
    MessageType.RESERVE_READ_PREFIX_WAIT,
})
_WITH_STATUSES = frozenset({
    MessageType.FINISH_WRITE, MessageType.ABORT_WRITE,
    MessageType.FINISH_READ, MessageType.DELETE,
})


class Code(enum.IntEnum):
    """The call-level outcome in an answer's header (0 is ``OK``)."""

    OK = 0
    BAD_FRAME = 1
    TOO_LARGE = 2
    UNKNOWN_TYPE = 3
    BAD_VERSION = 4
    NO_HELLO = 5
    WRONG_EPOCH = 6
    INVALID_ARGUMENT = 7
    CLOSED = 8
    NOT_ALLOWED = 9
    TIMEOUT = 10
    INTERNAL = 11
    TOO_MANY_CONNECTIONS = 12
    BUSY = 13

    @property
    def closes(self) -> bool:
        """Whether the daemon closes the connection after this code."""
        return self in CLOSING_CODES


CLOSING_CODES = frozenset({
    Code.BAD_FRAME, Code.TOO_LARGE, Code.UNKNOWN_TYPE, Code.BAD_VERSION,
    Code.NO_HELLO, Code.CLOSED, Code.NOT_ALLOWED, Code.TIMEOUT,
    Code.TOO_MANY_CONNECTIONS,
})


class Status(enum.IntEnum):
    """One key's outcome. Below 32 they are l1's; 32 and up the daemon's."""

    OK = 0
    KEY_NOT_EXIST = 1
    KEY_NOT_READABLE = 2
    KEY_NOT_WRITABLE = 3
    KEY_IN_WRONG_STATE = 4
    KEY_IS_LOCKED = 5
    OUT_OF_MEMORY = 6
    STALE_LEASE = 7
    SKIPPED = 8
    #: finish_write of a write whose lock lapsed: dropped, never readable;
    #: its quarantined block is freed now. Reserve the key again.
    WRITE_LAPSED = 9
    #: finish_write of a write whose key was deleted with force while it was
    #: reserved: dropped, never readable; its held block is freed now.
    WRITE_DELETED = 10
    NOT_OWNER = 32
    OVER_RELEASE = 33
    #: the key would take this connection past a per-connection limit of
    #: the daemon (read locks held, write bytes reserved); it and every key
    #: after it in the call were not passed on: nothing changed for them.
    #: Release what the connection holds, then ask again.
    OVER_LIMIT = 34
    #: reserve_read_prefix_wait with expected sizes: the key's object is
    #: finished in another size than the caller expects (another engine's
    #: layout of the key). Not locked, nothing changed: a miss, and the
    #: prefix stops there.
    SIZE_MISMATCH = 35


class Mode(enum.IntEnum):
    """reserve_write's mode (``l1.Mode``)."""

    #: Allocate missing keys and re-lock existing ones (the default).
    ALL = 0
    #: Allocate missing keys only; existing ones are ``KEY_NOT_WRITABLE``.
    NEW = 1
    #: Re-lock existing keys only.
    UPDATE = 2


class Flag(enum.IntFlag):
    """Bits of a keyed request's flags byte."""

    #: reserve_write carries one temporary flag per key.
    TEMPORARY = 0x01
    #: reserve_write carries one chain position per key.
    POSITIONS = 0x02
    #: delete removes objects in any state.
    FORCE = 0x04
    #: lookup starts loading the keys L2 holds into L1.
    PREFETCH = 0x08
    #: Version 2 only: finish_write, abort_write,
    #: finish_write_and_reserve_read, finish_read and delete name their
    #: records by handle (a handles block and one lease per handle) in
    #: place of the keys block.
    HANDLES = 0x10
    #: lookup and reserve_read_prefix_wait carry one expected payload size
    #: per key (``i64``, at least 1) after the keys block.
    SIZES = 0x20


#: OR'ed into a chain position: the chunk is a partial one (``l1.Partial``).
PARTIAL = 1 << 31
