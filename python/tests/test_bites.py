"""The checks of this suite fail against a deliberately broken client.

Each test breaks one thing (unittest.mock.patch) and runs the check that
guards it, expecting the check to see it.
"""

import threading
import unittest
from array import array
from unittest import mock

from kvalloc import Client, DeadlineExceededError, InvalidArgumentError
from kvalloc import client as client_module
from kvalloc import connection, handles, results
from kvalloc.handles import HandleTable, Records
from kvalloc.limits import MAX_INT64

from daemon import MIB
from helpers import DaemonTest, keys, python_to_go
import test_bad_input
import test_failures
import test_handles_daemon


class TestBites(DaemonTest):

    def test_a_view_off_by_a_block(self):
        real = Client.view

        def view(self, res, i):
            v = real(self, res, i)
            return self.block(res.offsets[i] + self.hello.align, len(v))
        with self.daemon.client() as c, mock.patch.object(Client, "view",
                                                          view), \
                mock.patch.object(Client, "views", lambda self, r: [
                    view(self, r, i) for i in range(len(r))]):
            self.assertNotEqual(
                python_to_go(self.daemon, c, keys(4, "bite"), 8 * MIB), [])

    def test_offsets_read_from_the_wrong_column(self):
        real = results._column

        def column(words, field, typecode):
            return real(words, 2 if field == 1 else field, typecode)
        with self.daemon.client() as c, \
                mock.patch.object(results, "_column", column):
            self.assertNotEqual(
                python_to_go(self.daemon, c, keys(4, "bite"), 8 * MIB), [])

    def test_no_deadline(self):
        def wait(poller, deadline):
            poller.poll()  # no timeout
        c = self.daemon.client(timeout=0.5)
        self.addCleanup(c.close)
        done = threading.Event()
        outcome = []

        def ping():
            try:
                c.ping()
                outcome.append("answered")
            except DeadlineExceededError:
                outcome.append("deadline")
            done.set()
        with mock.patch.object(connection.Connection, "_wait",
                               staticmethod(wait)):
            self.daemon.pause()
            t = threading.Thread(target=ping, daemon=True)
            t.start()
            # The check of test_failures.test_stalled: an error within
            # 1.5 s. Without deadlines the call is still blocked.
            self.assertFalse(done.wait(1.5))
            self.daemon.resume()
            t.join(10)
        self.assertEqual(outcome, ["answered"])


class _StaleHandles(Records):
    """A broken table: each key's first handle, whatever the lease, and
    never a record freed. It sends a handle after its record was freed."""

    def wrote(self, keys, raw, leases, handles):
        for k, s, h in zip(keys, raw, handles):
            if not s and h:
                self.writes.setdefault(k, h)

    def read(self, keys, raw, leases, handles, locks):
        for k, s, h in zip(keys, raw, handles):
            if not s and h:
                self.reads.setdefault(k, h)

    def write_handles(self, keys, leases):
        try:
            return array("I", map(self.writes.__getitem__, keys))
        except KeyError:
            return None

    def read_handles(self, keys, leases):
        try:
            return array("I", map(self.reads.__getitem__, keys))
        except KeyError:
            return None

    def any_handles(self, keys):
        return None

    def finished_writes(self, *a, **kw):
        pass

    def finished_reads(self, *a, **kw):
        pass

    def forget(self, *a, **kw):
        pass


class _ReadsNeverFreed(Records):
    """A broken table that never lets a read record go."""

    def finished_reads(self, *a, **kw):
        pass


class _BatchesNeverFreed(HandleTable):
    """A broken table that keeps a whole grant after its records went."""

    def finished(self, t, keys, leases, raw, locks, b, hs):
        if b is None:
            super().finished(t, keys, leases, raw, locks, b, hs)


class _LeasesOnly(Records):
    """A broken table that finds a write record by its lease alone, so
    that a lease presented with another key sends that key's handle."""

    def write_handles(self, keys, leases):
        by_lease = {lease: h for (_, lease), h in self.writes.items()}
        try:
            return array("I", map(by_lease.__getitem__, leases))
        except KeyError:
            return None


class _SharedTable(HandleTable):
    """A broken client whose connections share one table."""

    shared = None

    def __new__(cls):
        if cls.shared is None:
            cls.shared = HandleTable()
        return cls.shared


def _broken_table(cls):
    if cls is _SharedTable:
        cls.shared = None
    if issubclass(cls, Records):
        return mock.patch.object(handles, "Records", cls)
    return mock.patch.object(client_module, "HandleTable", cls)


class TestHandleTableBites(test_handles_daemon.TestCallsByHandle):
    """The checks of test_handles_daemon against broken handle tables."""

    def random_script(self):
        t = test_handles_daemon.TestSameAnswersInBothVersions(
            "test_random_script")
        t.daemon = self.daemon
        try:
            with self.assertRaises(AssertionError) as cm:
                t.test_random_script()
        finally:
            t.doCleanups()
        return str(cm.exception)

    def test_a_stale_handle_differs_from_version_1(self):
        # The broken table sends freed handles: the daemon answers
        # NOT_OWNER where version 1's call by key is OK.
        with _broken_table(_StaleHandles):
            self.assertIn("NOT_OWNER", self.random_script())

    def test_reads_never_freed(self):
        with _broken_table(_ReadsNeverFreed):
            self.random_script()

    def test_batches_never_freed(self):
        with _broken_table(_BatchesNeverFreed):
            self.c.connect()
            with self.assertRaises(AssertionError):
                super().test_a_cycle_of_5700_keys()

    def test_a_table_that_ignores_the_keys(self):
        with _broken_table(_LeasesOnly):
            self.c.connect()
            with self.assertRaises(AssertionError):
                super().test_a_key_with_another_keys_lease()

    def test_one_table_for_two_connections(self):
        with _broken_table(_SharedTable):
            self.c.connect()
            with self.assertRaises(AssertionError):
                super().test_two_connections()

    test_every_call_by_handle = test_a_lease_not_held_goes_by_key = None
    test_a_handle_after_a_forced_delete_by_another_connection = None
    test_a_cycle_of_5700_keys = test_two_connections = None
    test_a_key_with_another_keys_lease = None


class TestKilledClientBites(test_failures.TestKilledClient):
    """The after-kill check against a child that was never killed."""

    def test_mid_write(self):
        n = 8
        self.start_child("write", n)
        with self.assertRaises(AssertionError):
            self.assert_nothing_locked(n)

    test_holding_read_locks = test_mid_frame = None


class TestBadInputBites(test_bad_input.TestBadInput):
    """test_sizes' check against a client that does not check sizes."""

    def test_sizes(self):
        with mock.patch("kvalloc.client._size", lambda size: size):
            for size in (MAX_INT64 + 1, 1.5, "4096"):
                with self.subTest(size=size):
                    with self.assertRaises(Exception) as cm:
                        self.refused(self.c.reserve_write, keys(2), size)
                    self.assertNotIsInstance(cm.exception,
                                             InvalidArgumentError)

    # TestBadInput's other tests run there, not here.
    test_modes_locks_timeouts = test_per_key_arrays = test_keys = None
    test_frame_over_the_limit = test_a_block_of_no_key = None
    test_refused_by_the_daemon = None
    test_a_malformed_frame_closes_only_its_connection = None
    test_timeouts = test_timeouts_at_connect = None
    test_keys_not_a_sequence = test_other_arguments = None
    test_views_check_every_block = None


if __name__ == "__main__":
    unittest.main()
