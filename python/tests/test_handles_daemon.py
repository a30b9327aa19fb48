"""Version 2 against a real daemon: negotiation, the fallback through a
daemon of version 1, and the calls by handle.

Which frames went by handle is seen by a spy on the client's
``handle_request``. The differential test runs one random script of calls
on a version 1 and a version 2 connection (each with keys of its own) and
requires the same statuses from both, call by call: a handle sent after
its record was freed, or one the table lacks, shows as a difference.
"""

import contextlib
import random
import unittest
from unittest import mock

from kvalloc import Client, KeyBatch, Mode, ObjectKey, Status
from kvalloc import client as client_module
from kvalloc.enums import MessageType

from daemon import MIB
from helpers import STAMP, DaemonTest, keys, python_to_go, stamps
from test_fake_daemon import no_protocol_env
from v1proxy import V1Proxy

T = MessageType
OK, NOT_OWNER = Status.OK, Status.NOT_OWNER
SIZE = 8 * MIB


@contextlib.contextmanager
def spy():
    """The calls sent by handle, as (type, number of handles)."""
    sent = []
    real = client_module.handle_request

    def wrapped(t, id_, epoch, n, *a, **kw):
        sent.append((t, n))
        return real(t, id_, epoch, n, *a, **kw)
    with mock.patch.object(client_module, "handle_request", wrapped):
        yield sent


class TestNegotiation(DaemonTest):

    def test_version_2_and_version_1_side_by_side(self):
        kb = keys(8, "side")
        with self.daemon.client(protocol=2) as a, \
                self.daemon.client(protocol=1) as b:
            self.assertEqual((a.version, a.hello.version, a.hello.versions),
                             (2, 2, 0b110))
            self.assertEqual((b.version, b.hello.version, b.hello.versions),
                             (1, 1, 0))
            w = a.reserve_write(kb, 4096)
            self.assertTrue(all(w.handles))
            self.assertTrue(a.finish_write(kb, w).all_ok())
            r = b.reserve_read(kb)
            self.assertEqual(list(r.handles), [0] * len(kb))
            self.assertTrue(b.finish_read(kb, r).all_ok())
            self.assertTrue(b.delete(kb).all_ok())

    def test_the_fallback_through_a_version_1_daemon(self):
        no_protocol_env(self)
        p = V1Proxy(self.daemon.socket)
        self.addCleanup(p.close)
        with spy() as sent:
            with Client(p.path, timeout=10) as c:
                self.assertEqual((c.version, c.hello.versions), (1, 0))
                self.assertEqual(p.hellos, [2, 1])
                self.assertEqual(python_to_go(self.daemon, c,
                                              keys(16, "v1d"), SIZE), [])
                c.reconnect()
                self.assertEqual((c.version, p.hellos), (1, [2, 1, 2, 1]))
                c.ping()
        self.assertEqual(sent, [])

    def test_protocol_1_through_a_version_1_daemon(self):
        p = V1Proxy(self.daemon.socket)
        self.addCleanup(p.close)
        with Client(p.path, timeout=10, protocol=1) as c:
            self.assertEqual(c.version, 1)
        self.assertEqual(p.hellos, [1])


class TestCallsByHandle(DaemonTest):

    def setUp(self):
        super().setUp()
        self.c = self.daemon.client(timeout=60, protocol=2)
        self.addCleanup(self.c.close)

    def test_a_cycle_of_5700_keys(self):
        c, n = self.c, 5700
        kb = keys(n, "cycle57")
        st = stamps(kb, "v2")
        some = (0, n // 2, n - 1)
        with spy() as sent:
            w = c.reserve_write(kb, SIZE)
            self.assertTrue(w.all_ok(), w.statuses.count_of(OK))
            self.assertEqual(len(set(w.handles)), n)
            self.assertNotIn(0, w.handles)
            for i in some:
                v = c.view(w, i)
                v[:STAMP], v[SIZE - STAMP:] = st[i]
            self.assertTrue(c.finish_write(kb, w).all_ok())
            r = c.reserve_read(kb)
            self.assertTrue(r.all_ok())
            for i in some:
                v = c.view(r, i)
                self.assertEqual((bytes(v[:STAMP]), bytes(v[SIZE - STAMP:])),
                                 st[i])
            self.assertTrue(c.finish_read(kb, r).all_ok())
            self.assertEqual(len(c._handles), 0)
            self.assertTrue(c.delete(kb).all_ok())
        self.assertEqual(sent, [(T.FINISH_WRITE, n), (T.FINISH_READ, n)])
        s = c.stats()
        self.assertEqual((s.objects, s.write_locked, s.used_bytes), (0, 0, 0))

    def test_every_call_by_handle(self):
        c = self.c
        kb = keys(4, "every")
        with spy() as sent:
            w = c.reserve_write(kb, 4096, Mode.NEW)
            self.assertEqual(list(c.abort_write(kb.subset([3]),
                                                w.select([3]))), [OK])
            keep = [0, 1, 2]
            rr = c.finish_write_and_reserve_read(kb.subset(keep),
                                                 w.select(keep), locks=2)
            self.assertTrue(rr.all_ok())
            self.assertTrue(all(rr.handles))
            self.assertTrue(c.finish_read(kb.subset(keep), rr).all_ok())
            # One lock left each; delete by handle without force meets
            # them, with force drops the keys at once.
            self.assertEqual(list(c.delete(kb.subset([0]))),
                             [Status.KEY_IS_LOCKED])
            self.assertEqual(list(c.delete(kb.subset([0]), force=True)),
                             [OK])
            self.assertEqual(c.stats().quarantined_bytes, 4096)
            # The record outlives the delete: the last lock by handle.
            self.assertTrue(c.finish_read(kb.subset(keep), rr).all_ok())
            self.assertEqual(c.stats().quarantined_bytes, 0)
            # Gone: by key, NOT_OWNER, as version 1 answers.
            self.assertEqual(list(c.finish_read(kb.subset(keep), rr)),
                             [NOT_OWNER] * 3)
        self.assertEqual(sent, [
            (T.ABORT_WRITE, 1), (T.FINISH_WRITE_AND_RESERVE_READ, 3),
            (T.FINISH_READ, 3), (T.DELETE, 1), (T.DELETE, 1),
            (T.FINISH_READ, 3)])
        self.assertEqual(len(c._handles), 0)
        c.delete(kb, force=True)

    def test_a_handle_after_a_forced_delete_by_another_connection(self):
        c = self.c
        kw, kr = keys(3, "fd-w"), keys(2, "fd-r")
        with self.daemon.client(protocol=2) as other, spy() as sent:
            w = c.reserve_write(kw, 4096)
            c.finish_write(kr, c.reserve_write(kr, 4096))
            r = c.reserve_read(kr, locks=2)
            self.assertEqual(list(other.delete(kw, force=True)), [OK] * 3)
            self.assertEqual(list(other.delete(kr, force=True)), [OK] * 2)
            # The writer's handles still name its records: WRITE_DELETED,
            # and the records go.
            self.assertEqual(list(c.finish_write(kw, w)),
                             [Status.WRITE_DELETED] * 3)
            self.assertEqual(list(c.finish_write(kw, w)), [NOT_OWNER] * 3)
            # The reader's: OK, the last lock frees the block.
            self.assertEqual(list(c.finish_read(kr, r)), [OK] * 2)
            self.assertNotEqual(c.stats().quarantined_bytes, 0)
            self.assertEqual(list(c.finish_read(kr, r)), [OK] * 2)
            self.assertEqual(c.stats().quarantined_bytes, 0)
            self.assertEqual(list(c.finish_read(kr, r)), [NOT_OWNER] * 2)
        self.assertEqual([t for t, _ in sent],
                         [T.FINISH_WRITE, T.FINISH_WRITE, T.FINISH_READ,
                          T.FINISH_READ])
        self.assertEqual(len(c._handles), 0)

    def test_two_connections(self):
        c = self.c
        kb = keys(6, "two")
        with self.daemon.client(protocol=2) as b, spy() as sent:
            c.finish_write(kb, c.reserve_write(kb, 4096))
            ra = c.reserve_read(kb)
            rb = b.reserve_read(kb, locks=2)
            self.assertEqual(list(ra.leases), list(rb.leases))
            # Each connection its own records and handles.
            self.assertTrue(c.finish_read(kb, ra).all_ok())
            self.assertTrue(b.finish_read(kb, rb).all_ok())
            self.assertTrue(b.finish_read(kb, rb).all_ok())
            # Another connection's handles mean nothing on b: its write
            # records' handles sent on b are NOT_OWNER, and c's records
            # stay.
            w = c.reserve_write(keys(3, "two-w"), 4096)
            b._handles.batches.update(c._handles.batches)
            self.assertEqual(list(b.finish_write(keys(3, "two-w"), w)),
                             [NOT_OWNER] * 3)
            self.assertTrue(c.finish_write(keys(3, "two-w"), w).all_ok())
        self.assertEqual(sent, [(T.FINISH_WRITE, 6)] +
                         [(T.FINISH_READ, 6)] * 3 +
                         [(T.FINISH_WRITE, 3)] * 2)
        self.assertEqual(len(c._handles), 0)

    def test_a_key_with_another_keys_lease(self):
        # The lease of key 1 presented with key 0 names no record of key
        # 0: NOT_OWNER, as by key, and key 1's write is left as it was.
        # A copy of the keys (equal, not the same objects) is the keys.
        c = self.c
        kb = keys(2, "swap")
        with spy() as sent:
            w = c.reserve_write(kb, 4096)
            self.assertEqual(list(c.finish_write(kb.subset([0]),
                                                 w.select([1]))),
                             [NOT_OWNER])
            self.assertEqual(list(c.finish_write(kb.subset([0]),
                                                 [w.leases[1]])),
                             [NOT_OWNER])
            copy = KeyBatch([ObjectKey(bytes(k.chunk_hash), k.model,
                                       k.kv_rank, k.group_id, k.cache_salt)
                             for k in kb])
            self.assertEqual(list(c.finish_write(copy, w)), [OK, OK])
        self.assertEqual(sent, [(T.FINISH_WRITE, 2)])
        self.assertEqual(len(c._handles), 0)
        c.delete(kb)

    def test_a_lease_not_held_goes_by_key(self):
        c = self.c
        kb = keys(2, "notheld")
        w = c.reserve_write(kb, 4096)
        with spy() as sent:
            wrong = [w.leases[0], w.leases[1] ^ 1 << 40]
            self.assertEqual(list(c.finish_write(kb, wrong)),
                             [OK, NOT_OWNER])
            self.assertEqual(list(c.abort_write(kb.subset([1]),
                                                w.select([1]))), [OK])
        self.assertEqual(sent, [(T.ABORT_WRITE, 1)])
        c.delete(kb)


class TestSameAnswersInBothVersions(DaemonTest):
    """One random script, on a version 1 and a version 2 connection."""

    STEPS = 1000

    def test_random_script(self):
        worlds = [_World(self.daemon, 1), _World(self.daemon, 2)]
        for w in worlds:
            self.addCleanup(w.close)
        rnd = random.Random(20261202)
        for step in range(self.STEPS):
            op = _pick(rnd, worlds[0])
            got = [w.run(op) for w in worlds]
            self.assertEqual(got[0], got[1], f"step {step}: {op}")
        # Let go of everything the script holds: the table must then be
        # empty, as the daemon's records are.
        for w in worlds:
            w.release_all()
        self.assertEqual(len(worlds[1].c._handles), 0)
        self.assertGreater(min(worlds[1].by_handle, worlds[1].by_batch),
                           self.STEPS // 100,
                           (worlds[1].by_handle, worlds[1].by_batch))
        s = worlds[0].c.stats()
        self.assertEqual((s.write_locked, s.quarantined_bytes), (0, 0))


class _World:
    """One connection's run of the script, with its own keys."""

    def __init__(self, daemon, version):
        self.c = daemon.client(protocol=version)
        self.other = daemon.client(protocol=version)
        self.kb = keys(6, f"diff-v{version}-")
        self.grants = []  # (kind, indices, Results, client, keys)
        # Calls sent by handle: of a whole grant, and of other keys.
        self.by_batch = self.by_handle = 0

    def close(self):
        self.c.close()
        self.other.close()

    def sub(self, idx):
        return self.kb.subset(idx)

    def run(self, op):
        kind = op[0]
        c = self.other if op[-1] == "other" else self.c
        if kind in ("rw", "rr", "rrp"):
            _, idx, arg, _ = op
            if kind == "rw":
                res = c.reserve_write(self.sub(idx), 4096, arg)
            elif kind == "rr":
                res = c.reserve_read(self.sub(idx), arg)
            else:
                res = c.reserve_read_prefix(self.sub(idx), arg)
            self.grants.append(("w" if kind == "rw" else "r", idx, res, c,
                                self.sub(idx)))
            return [s.name for s in res.statuses]
        if kind == "del":
            _, idx, force, _ = op
            return [s.name for s in c.delete(self.sub(idx), force)]
        _, g, js, locks, stale, _ = op
        _, idx, res, _, gks = self.grants[g]
        whole = js is None or js == "ok"
        if js is None:  # the grant's keys and Results, as they came
            ks, leases, js = gks, res, range(len(idx))
        elif js == "ok":  # its OK keys: keys.subset(ok), res.select(ok)
            js = res.ok_indices()
            ks, leases = self.sub([idx[j] for j in js]), res.select(js)
        else:
            ks = self.sub([idx[j] for j in js])
            leases = [res.leases[j] ^ (1 << 40 if stale else 0) for j in js]
        with spy() as sent:
            if kind == "fw":
                out = c.finish_write(ks, leases)
            elif kind == "aw":
                out = c.abort_write(ks, leases)
            elif kind == "fr":
                out = c.finish_read(ks, leases, locks)
            else:
                rr = c.finish_write_and_reserve_read(ks, leases, locks)
                self.grants.append(("r", [idx[j] for j in js], rr, c, ks))
                out = rr.statuses
        self.by_handle += len(sent) and not whole
        self.by_batch += len(sent) and whole
        return [s.name for s in out]

    def release_all(self):
        for kind, idx, res, c, _ in self.grants:
            ok = res.ok_indices()
            ks, ls = self.sub([idx[j] for j in ok]), res.select(ok)
            if kind == "w":
                c.abort_write(ks, ls)
            else:
                for _ in range(128):
                    if not c.finish_read(ks, ls).count_of(OK):
                        break
        self.c.delete(self.kb, force=True)


def _pick(rnd, world):
    """One step of the script, by grant number and position, the same for
    both worlds."""
    n = len(world.kb)
    grants = world.grants
    who = "other" if rnd.random() < 0.15 else "self"

    def some():
        return [rnd.randrange(n) for _ in range(rnd.randint(1, 4))]
    r = rnd.random()
    if r < 0.2 or not grants:
        return ("rw", some(), rnd.choice([Mode.ALL, Mode.NEW, Mode.ALL]),
                who)
    if r < 0.35:
        return ("rr", some(), rnd.randint(1, 3), who)
    if r < 0.42:
        return ("rrp", some(), rnd.randint(1, 2), who)
    if r < 0.5:
        return ("del", some(), rnd.random() < 0.7, who)
    # Mostly the latest grants, and their OK keys (the worlds' statuses
    # are the same, so world 0's say which): the calls that may go by
    # handle.
    g = len(grants) - 1 - min(int(rnd.expovariate(0.7)), len(grants) - 1)
    kind, idx, res, _, _ = grants[g]
    ok = res.ok_indices()
    pool = ok if ok and rnd.random() < 0.85 else range(len(idx))
    js = rnd.sample(pool, rnd.randint(1, len(pool)))
    if rnd.random() < 0.1:
        js.append(js[0])  # a key repeated in the call
    stale = rnd.random() < 0.1
    if res.all_ok() and rnd.random() < 0.6:
        js, stale = None, False  # the grant's own keys and Results
    elif ok and rnd.random() < 0.4:
        js, stale = "ok", False  # its OK keys, selected
    who = "other" if rnd.random() < 0.05 else "self"
    if kind == "w":
        op = rnd.choice(["fw", "fw", "aw", "fwrr"])
        return (op, g, js, rnd.randint(1, 2) if op == "fwrr" else 0, stale,
                who)
    return ("fr", g, js, rnd.randint(1, 3), stale, who)


if __name__ == "__main__":
    unittest.main()
