"""Full cycles against a real daemon, read back across languages."""

import threading
import unittest

from kvalloc import (PARTIAL, InvalidArgumentError, KeyBatch, Mode, Status)
from kvalloc.limits import MAX_INT64

from daemon import MIB
from helpers import STAMP, DaemonTest, keys, python_to_go, stamps

SIZE = 8 * MIB


class TestCycle(DaemonTest):

    def test_python_writes_go_reads(self):
        with self.daemon.client() as c:
            self.assertEqual(python_to_go(self.daemon, c, keys(64, "py-go"),
                                          SIZE), [])
            self.assertEqual(c.stats().objects, 0)

    def test_go_writes_python_reads(self):
        kb = keys(64, "go-py")
        st = stamps(kb, "go")
        out = self.daemon.go("-size", str(SIZE), "write",
                             stdin=_json(kb, st))
        self.assertEqual(out["finished"], ["OK"] * len(kb))
        with self.daemon.client() as c:
            res = c.reserve_read_prefix(kb)
            self.assertEqual(res.prefix, len(kb))
            for i, v in enumerate(c.views(res)):
                self.assertEqual(bytes(v[:STAMP]), st[i][0])
                self.assertEqual(bytes(v[SIZE - STAMP:SIZE]), st[i][1])
            self.assertTrue(c.finish_read(kb, res).all_ok())
            self.assertTrue(c.delete(kb).all_ok())

    def test_every_call(self):
        kb = keys(6, "every")
        with self.daemon.client() as c:
            res = c.reserve_write(kb, 4096, Mode.NEW,
                                  temporary=[False] * 5 + [True],
                                  positions=[0, 1, 2, 3, 4, 5 | PARTIAL])
            self.assertTrue(res.all_ok(), res.statuses)
            ab = kb.subset([4])
            self.assertEqual(list(c.abort_write(ab, res.select([4]))),
                             [Status.OK])
            keep = [0, 1, 2, 3, 5]
            rr = c.finish_write_and_reserve_read(kb.subset(keep),
                                                 res.select(keep), locks=2)
            self.assertTrue(rr.all_ok(), rr.statuses)
            self.assertTrue(c.finish_read(kb.subset(keep), rr,
                                          locks=2).all_ok())
            # The aborted key 4 ends the prefix: KEY_NOT_EXIST, then SKIPPED;
            # the temporary key 5 went with its last read lock.
            p = c.reserve_read_prefix(kb)
            self.assertEqual(p.prefix, 4)
            self.assertEqual(list(p.statuses)[4:],
                             [Status.KEY_NOT_EXIST, Status.SKIPPED])
            self.assertTrue(c.finish_read(kb.subset(range(4)),
                                          p.select(range(4))).all_ok())
            r = c.reserve_read(kb)
            self.assertEqual(r.statuses.indices(Status.OK), [0, 1, 2, 3])
            c.touch(kb)
            self.assertEqual(list(c.delete(kb.subset([0])))[0],
                             Status.KEY_IS_LOCKED)
            self.assertEqual(list(c.delete(kb.subset([0]), force=True)),
                             [Status.OK])
            rest = [1, 2, 3]
            self.assertTrue(c.finish_read(kb.subset(rest),
                                          r.select(rest)).all_ok())
            # Mode NEW refuses existing keys, UPDATE missing ones.
            again = c.reserve_write(kb.subset([1, 4]), 4096, Mode.NEW)
            self.assertEqual(list(again.statuses),
                             [Status.KEY_NOT_WRITABLE, Status.OK])
            c.abort_write(kb.subset([4]), again.select([1]))
            upd = c.reserve_write(kb.subset([1, 4]), 4096, Mode.UPDATE)
            self.assertEqual(upd.statuses[1], Status.KEY_NOT_WRITABLE)
            c.abort_write(kb.subset([1]), upd.select([0]))
            c.delete(kb, force=True)
            s = c.stats()
            self.assertEqual((s.objects, s.write_locked), (0, 0))

    def test_int64_edges(self):
        kb = keys(2, "edges")
        with self.daemon.client() as c:
            before = self.quiet_stats(c)
            for size in (0, -1, MAX_INT64 + 1):
                with self.assertRaises(InvalidArgumentError):
                    c.reserve_write(kb, size)
            self.assertEqual(self.quiet_stats(c), before)
            one = c.reserve_write(kb, 1)
            self.assertTrue(one.all_ok())
            self.assertEqual(list(one.sizes), [c.hello.align] * 2)
            c.view(one, 1)[0] = 0xA5
            c.finish_write(kb, one)
            r = c.reserve_read(kb)
            self.assertEqual(c.view(r, 1)[0], 0xA5)
            c.finish_read(kb, r)
            c.delete(kb)
            huge = c.reserve_write(keys(2, "huge"), MAX_INT64)
            self.assertEqual(list(huge.statuses), [Status.OUT_OF_MEMORY] * 2)
            self.assertEqual(list(huge.leases), [0, 0])
            s = c.stats()
            self.assertEqual((s.objects, s.used_bytes, s.write_locked),
                             (0, 0, 0))

    def test_10000_keys_of_8mib_in_45gib(self):
        # 10,000 keys of 8 MiB do not fit 45 GiB: the first 5760 are
        # granted, the tail is OUT_OF_MEMORY, and all of it is one frame.
        n = 10_000
        kb = keys(n, "big")
        st = stamps(kb, "big")
        with self.daemon.client(timeout=60) as c:
            fit = c.hello.pool_size // SIZE
            res = c.reserve_write(kb, SIZE)
            ok = res.ok_indices()
            self.assertEqual(ok, list(range(fit)))
            self.assertEqual(res.statuses.count_of(Status.OUT_OF_MEMORY),
                             n - fit)
            for i in (0, fit // 2, fit - 1):
                v = c.view(res, i)
                v[:STAMP], v[SIZE - STAMP:] = st[i]
            self.assertTrue(c.finish_write(kb.subset(ok),
                                           res.select(ok)).all_ok())
            p = c.reserve_read_prefix(kb)
            self.assertEqual(p.prefix, fit)
            for i in (0, fit // 2, fit - 1):
                v = c.view(p, i)
                self.assertEqual((bytes(v[:STAMP]), bytes(v[SIZE - STAMP:])),
                                 st[i])
            self.assertEqual(p.statuses[fit], Status.KEY_NOT_EXIST)
            self.assertTrue(c.finish_read(kb.subset(ok),
                                          p.select(ok)).all_ok())
            d = c.delete(kb)
            self.assertEqual(d.count_of(Status.OK), fit)
            s = c.stats()
            self.assertEqual((s.objects, s.used_bytes), (0, 0))

    def test_threads_share_a_client(self):
        errors = []
        with self.daemon.client() as c:
            def worker(t: int) -> None:
                try:
                    kb = keys(50, f"thread{t}-")
                    for _ in range(20):
                        res = c.reserve_write(kb, 4096)
                        assert res.all_ok(), res.statuses
                        for i, v in enumerate(c.views(res)):
                            v[:8] = (t * 1000 + i).to_bytes(8, "little")
                        assert c.finish_write(kb, res).all_ok()
                        r = c.reserve_read(kb)
                        for i, v in enumerate(c.views(r)):
                            got = int.from_bytes(v[:8], "little")
                            assert got == t * 1000 + i, (t, i, got)
                        assert c.finish_read(kb, r).all_ok()
                        assert c.delete(kb).all_ok()
                except Exception as e:  # reported by the main thread
                    errors.append(e)
            ts = [threading.Thread(target=worker, args=(t,))
                  for t in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])
            self.assertEqual(c.stats().objects, 0)

    def test_keys_as_a_plain_list(self):
        kb = keys(3, "list")
        with self.daemon.client() as c:
            res = c.reserve_write(list(kb), 4096)
            self.assertTrue(c.finish_write(list(kb), list(res.leases))
                            .all_ok())
            self.assertTrue(c.delete(KeyBatch(list(kb))).all_ok())


def _json(kb, st=None):
    from daemon import key_json
    return key_json(kb, st)


if __name__ == "__main__":
    unittest.main()
