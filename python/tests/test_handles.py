"""The handle table alone: what it records, finds and frees.

Each rule of PROTOCOL.md's "Records and their handles" that the client
mirrors, on plain values, record by record (Records) and for whole grants
(HandleTable's batches): the calls against a real daemon are in
test_handles_daemon.py.
"""

import unittest
from array import array

from kvalloc import MessageType, ObjectKey, Status
from kvalloc.handles import HandleTable, Records
from kvalloc.results import Result, Results

K = [ObjectKey(bytes([i]) * 4, "m") for i in range(4)]
OK, NOT_OWNER, OVER_RELEASE, OVER_LIMIT = (
    Status.OK, Status.NOT_OWNER, Status.OVER_RELEASE, Status.OVER_LIMIT)


def raw(*sts):
    return bytes(sts)


def Q(*v):
    return array("Q", v)


def I(*v):  # noqa: E743
    return array("I", v)


class TestWrites(unittest.TestCase):

    def test_grants_and_finishes(self):
        t = Records()
        t.wrote(K[:3], raw(OK, Status.OUT_OF_MEMORY, OK), Q(10, 0, 12),
                I(1, 0, 3))
        self.assertEqual(t.writes, {(K[0], 10): 1, (K[2], 12): 3})
        self.assertEqual(list(t.write_handles([K[2], K[0]], Q(12, 10))),
                         [3, 1])
        self.assertIsNone(t.write_handles([K[0], K[1]], Q(10, 0)))
        self.assertIsNone(t.write_handles([K[0]], Q(11)))  # another lease
        self.assertIsNone(t.read_handles([K[0]], Q(10)))   # another kind
        # Any status frees the record, NOT_OWNER and lapses included.
        t.finished_writes([K[0]], Q(10), raw(Status.WRITE_LAPSED))
        self.assertEqual(t.writes, {(K[2], 12): 3})
        t.finished_writes([K[2]], Q(12), raw(NOT_OWNER), I(3))
        self.assertEqual(len(t), 0)

    def test_an_ok_without_a_handle_is_not_recorded(self):
        t = Records()
        t.wrote(K[:2], raw(OK, OK), Q(10, 11), I(0, 2))
        self.assertEqual(t.writes, {(K[1], 11): 2})

    def test_over_limit_keeps_the_write(self):
        t = Records()
        t.wrote(K[:2], raw(OK, OK), Q(10, 11), I(1, 2))
        t.finished_writes(K[:2], Q(10, 11), raw(OK, OVER_LIMIT), I(1, 2))
        self.assertEqual(t.writes, {(K[1], 11): 2})

    def test_a_call_of_every_record_clears_them(self):
        t = Records()
        t.wrote(K[:2], raw(OK, OK), Q(10, 11), I(1, 2))
        t.finished_writes(K[:2], Q(10, 11), raw(OK, OK), I(1, 2))
        self.assertEqual(len(t), 0)
        # A repeated handle is not every record: only those named go.
        t.wrote(K[:3], raw(OK, OK, OK), Q(10, 11, 12), I(1, 2, 3))
        t.finished_writes([K[0], K[0], K[1]], Q(10, 10, 11),
                          raw(OK, NOT_OWNER, OK), I(1, 1, 2))
        self.assertEqual(t.writes, {(K[2], 12): 3})

    def test_a_new_grant_replaces_the_handle(self):
        t = Records()
        t.wrote(K[:1], raw(OK), Q(10), I(1))
        t.wrote(K[:1], raw(OK), Q(10), I(7))
        self.assertEqual(t.writes, {(K[0], 10): 7})

    def test_unhashable_keys_go_by_key(self):
        t = Records()
        odd = ObjectKey(bytearray(b"xx"), "m")
        t.wrote([odd, K[1]], raw(OK, OK), Q(10, 11), I(1, 2))
        self.assertIsNone(t.write_handles([odd], Q(10)))
        t.finished_writes([odd], Q(10), raw(OK))
        t.forget([odd], Q(10))
        self.assertIsNone(t.any_handles([odd]))


class TestReads(unittest.TestCase):

    def test_counts_locks_per_lease(self):
        t = Records()
        t.read(K[:2], raw(OK, OK), Q(20, 21), I(5, 6), 3)
        t.read(K[:1], raw(OK), Q(20), I(5), 2)   # the same record: 5 now
        self.assertEqual(t.counts, {(K[0], 20): 5, (K[1], 21): 3})
        self.assertEqual(list(t.read_handles(K[:2], Q(20, 21))), [5, 6])
        t.finished_reads(K[:2], Q(20, 21), raw(OK, OK), 3, I(5, 6))
        self.assertEqual(t.counts, {(K[0], 20): 2})
        t.finished_reads(K[:1], Q(20), raw(OVER_RELEASE), 3, I(5))
        self.assertEqual(t.counts, {(K[0], 20): 2})
        t.finished_reads(K[:1], Q(20), raw(OK), 2, I(5))
        self.assertEqual(len(t), 0)

    def test_a_key_repeated_in_one_call(self):
        t = Records()
        t.read([K[0], K[0], K[1]], raw(OK, OK, OK), Q(20, 20, 21),
               I(5, 5, 6), 1)
        self.assertEqual(t.counts, {(K[0], 20): 2, (K[1], 21): 1})
        t.finished_reads([K[0], K[0]], Q(20, 20), raw(OK, OK), 1, I(5, 5))
        self.assertEqual(t.counts, {(K[1], 21): 1})

    def test_a_refused_finish_read_drops_the_record(self):
        for st in (Status.STALE_LEASE, Status.KEY_IN_WRONG_STATE,
                   Status.KEY_NOT_EXIST, NOT_OWNER):
            with self.subTest(st.name):
                t = Records()
                t.read(K[:2], raw(OK, OK), Q(20, 21), I(5, 6), 4)
                t.finished_reads(K[:2], Q(20, 21), raw(st, OK), 1, I(5, 6))
                self.assertEqual(t.counts, {(K[1], 21): 3})
                self.assertEqual(set(t.reads), {(K[1], 21)})

    def test_another_handle_for_a_held_lease_restarts_the_count(self):
        t = Records()
        t.read(K[:1], raw(OK), Q(20), I(5), 4)
        t.read(K[:1], raw(OK), Q(20), I(9), 1)
        self.assertEqual((t.reads, t.counts),
                         ({(K[0], 20): 9}, {(K[0], 20): 1}))

    def test_every_record_given_back_at_once(self):
        t = Records()
        t.read(K[:3], raw(OK, OK, OK), Q(20, 21, 22), I(5, 6, 7), 2)
        t.finished_reads(K[:3], Q(20, 21, 22), raw(OK, OK, OK), 2,
                         I(5, 6, 7))
        self.assertEqual(len(t), 0)
        # Not the last lock of one of them: it stays.
        t.read(K[:3], raw(OK, OK, OK), Q(20, 21, 22), I(5, 6, 7), 2)
        t.read(K[:1], raw(OK), Q(20), I(5), 1)
        t.finished_reads(K[:3], Q(20, 21, 22), raw(OK, OK, OK), 2,
                         I(5, 6, 7))
        self.assertEqual(t.counts, {(K[0], 20): 1})


class TestDeleteAndForget(unittest.TestCase):

    def test_any_record_of_each_key(self):
        t = Records()
        self.assertIsNone(t.any_handles(K[:1]))
        t.wrote(K[:1], raw(OK), Q(10), I(1))
        t.read(K[1:3], raw(OK, OK), Q(20, 21), I(2, 3), 1)
        hs, ls = t.any_handles([K[2], K[0]])
        self.assertEqual((list(hs), list(ls)), ([3, 1], [21, 10]))
        self.assertIsNone(t.any_handles([K[0], K[3]]))
        self.assertIsNone(t.any_handles([]))

    def test_forget_drops_both_kinds(self):
        t = Records()
        t.wrote(K[:1], raw(OK), Q(10), I(1))
        t.read(K[:1], raw(OK), Q(11), I(2), 1)
        t.forget([K[0], K[0]], Q(10, 11))
        self.assertEqual((len(t), t.counts), (0, {}))

    def test_clear(self):
        t = Records()
        t.wrote(K[:1], raw(OK), Q(10), I(1))
        t.read(K[:1], raw(OK), Q(11), I(2), 1)
        t.clear()
        self.assertEqual((len(t), t.counts), (0, {}))


def _results(sts, leases, handles):
    return Results.from_list([Result(s, 0, 4096, 1, lease, h)
                              for s, lease, h in zip(sts, leases, handles)])


class TestBatches(unittest.TestCase):
    """Whole grants, and what moves them into Records."""

    def test_a_write_batch_by_its_results(self):
        t = HandleTable()
        w = _results([OK, OK], [10, 11], [1, 2])
        t.wrote(tuple(K[:2]), w)
        self.assertEqual((len(t.batches), len(t.records)), (1, 0))
        hs, b = t.handles(MessageType.FINISH_WRITE, tuple(K[:2]), w,
                          w.leases)
        self.assertEqual((list(hs), b.results), ([1, 2], w))
        # Other keys, or the leases as a list: by (key, lease), from
        # Records.
        hs, b = t.handles(MessageType.FINISH_WRITE, tuple(K[1:3]), w,
                          w.leases)
        self.assertEqual((hs, b, len(t.batches), len(t.records)),
                         (None, None, 0, 2))
        hs, b = t.handles(MessageType.FINISH_WRITE, tuple(K[:2]),
                          list(w.leases), w.leases)
        self.assertEqual((list(hs), b), ([1, 2], None))

    def test_a_batch_freed_whole(self):
        t = HandleTable()
        w = _results([OK, OK], [10, 11], [1, 2])
        t.wrote(tuple(K[:2]), w)
        _, b = t.handles(MessageType.FINISH_WRITE, tuple(K[:2]), w, w.leases)
        t.finished(MessageType.FINISH_WRITE, tuple(K[:2]), w.leases,
                   raw(OK, Status.WRITE_DELETED), 0, b, w.handles)
        self.assertEqual(len(t), 0)

    def test_a_batch_cut_at_the_limit(self):
        t = HandleTable()
        w = _results([OK, OK], [10, 11], [1, 2])
        t.wrote(tuple(K[:2]), w)
        _, b = t.handles(MessageType.FINISH_WRITE_AND_RESERVE_READ,
                         tuple(K[:2]), w, w.leases)
        t.finished(MessageType.FINISH_WRITE_AND_RESERVE_READ, tuple(K[:2]),
                   w.leases, raw(OK, OVER_LIMIT), 1, b, w.handles)
        self.assertEqual((len(t.batches), t.records.writes),
                         (0, {(K[1], 11): 2}))

    def test_a_read_batch(self):
        t = HandleTable()
        r = _results([OK, OK], [20, 21], [5, 6])
        t.read(tuple(K[:2]), r, 2)
        self.assertIs(t.reading, t.batches[id(r)])
        # A second read grant while one is held: both go record by record,
        # and a shared (key, lease) adds up.
        r2 = _results([OK], [20], [5])
        t.read(tuple(K[:1]), r2, 1)
        self.assertEqual((t.reading, len(t.batches)), (None, 0))
        self.assertEqual(t.records.counts, {(K[0], 20): 3, (K[1], 21): 2})

    def test_a_read_batch_given_back(self):
        t = HandleTable()
        r = _results([OK, OK], [20, 21], [5, 6])
        for locks, sts, left in ((2, raw(OK, OK), {}),
                                 (1, raw(OK, OK), {(K[0], 20): 1,
                                                   (K[1], 21): 1}),
                                 (2, raw(OK, Status.STALE_LEASE),
                                  {})):
            with self.subTest(locks=locks, statuses=sts):
                t.clear()
                t.read(tuple(K[:2]), r, 2)
                _, b = t.handles(MessageType.FINISH_READ, tuple(K[:2]), r,
                                 r.leases)
                self.assertIsNotNone(b)
                t.finished(MessageType.FINISH_READ, tuple(K[:2]), r.leases,
                           sts, locks, b, r.handles)
                self.assertEqual((t.reading, t.batches, t.records.counts),
                                 (None, {}, left))

    def test_a_partial_grant_by_its_selection(self):
        t = HandleTable()
        w = _results([OK, Status.OUT_OF_MEMORY, OK], [10, 0, 12], [1, 0, 3])
        t.wrote(tuple(K[:3]), w)
        self.assertEqual((len(t), len(t.records)), (2, 0))
        ok = w.ok_indices()
        sel = w.select(ok)
        hs, b = t.handles(MessageType.FINISH_WRITE, (K[0], K[2]), sel,
                          sel.leases)
        self.assertEqual((list(hs), b is not None), ([1, 3], True))
        # Other positions, or the whole Results (whose key 1 has no
        # record): record by record, where key 1 misses.
        for given, ks in ((w.select([2, 0]), (K[2], K[0])),
                          (w.select([0]), (K[0],)), (w, tuple(K[:3]))):
            with self.subTest(given=given.origin and given.origin[1]):
                t.clear()
                t.wrote(tuple(K[:3]), w)
                hs, b = t.handles(MessageType.FINISH_WRITE, ks, given,
                                  given.leases)
                self.assertIsNone(b)
                self.assertEqual(hs is None, given is w)
                self.assertEqual(t.records.writes,
                                 {(K[0], 10): 1, (K[2], 12): 3})

    def test_a_prefix_read_by_its_selection(self):
        t = HandleTable()
        r = _results([OK, OK, Status.KEY_NOT_EXIST, Status.SKIPPED],
                     [20, 21, 0, 0], [5, 6, 0, 0])
        t.read(tuple(K[:4]), r, 1)
        sel = r.select(range(2))
        hs, b = t.handles(MessageType.FINISH_READ, tuple(K[:2]), sel,
                          sel.leases)
        self.assertEqual(list(hs), [5, 6])
        t.finished(MessageType.FINISH_READ, tuple(K[:2]), sel.leases,
                   raw(OK, OK), 1, b, hs)
        self.assertEqual((len(t), t.reading), (0, None))

    def test_an_ok_without_a_handle_is_no_batch(self):
        t = HandleTable()
        w = _results([OK, OK], [10, 11], [1, 0])
        t.wrote(tuple(K[:2]), w)
        self.assertEqual((t.batches, t.records.writes),
                         ({}, {(K[0], 10): 1}))

    def test_delete_and_forget_settle_the_batches(self):
        t = HandleTable()
        w = _results([OK], [10], [1])
        t.wrote(tuple(K[:1]), w)
        hs, ls = t.delete_handles(tuple(K[:1]))
        self.assertEqual((list(hs), list(ls), t.batches), ([1], [10], {}))
        t.forget(tuple(K[:1]), w.leases)
        self.assertEqual(len(t), 0)


if __name__ == "__main__":
    unittest.main()
