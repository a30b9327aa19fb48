package l1check

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/l1"
)

// DeliveryManager is what CheckDelivery calls.
type DeliveryManager interface {
	ReserveWrite(keys []Key, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error)
	Delete(keys []Key, force bool) ([]l1.Status, error)
	AddListenerFunc(f func(l1.Event[Key]))
	Stats() l1.Stats
}

// CheckDelivery is the listener-delivery stress check: callers goroutines
// reserve and delete their own keys for run, while a listener that takes
// delay per event runs. It fails when a caller returns before the events of
// its own operations were delivered, when the events waiting for delivery
// (sampled through Stats.PendingEvents) exceed one per caller, or when a
// caller has not returned 10 s after the load stopped. m must have room for
// callers objects of size bytes and no other listener.
func CheckDelivery(m DeliveryManager, callers int, size int64, delay, run time.Duration) error {
	var delivered sync.Map // key -> *atomic.Int32
	m.AddListenerFunc(func(ev l1.Event[Key]) {
		for _, k := range ev.Keys {
			n, _ := delivered.LoadOrStore(k, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
		time.Sleep(delay)
	})
	stop := make(chan struct{})
	errs := make(chan error, callers+1)
	var maxPending atomic.Int64
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := Key(w<<24 | i)
				rs, err := m.ReserveWrite([]Key{k}, nil, size, l1.ModeAll)
				if err != nil || rs[0].Status != l1.OK {
					errs <- fmt.Errorf("ReserveWrite(%d): %v %v", k, rs, err)
					return
				}
				if _, err := m.Delete([]Key{k}, true); err != nil {
					errs <- fmt.Errorf("Delete(%d): %v", k, err)
					return
				}
				if n, _ := delivered.Load(k); n == nil || n.(*atomic.Int32).Load() != 2 {
					errs <- fmt.Errorf("caller returned before its events were delivered (key %d)", k)
					return
				}
			}
		}()
	}
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p := int64(m.Stats().PendingEvents); p > maxPending.Load() {
				maxPending.Store(p)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	select {
	case err := <-errs:
		close(stop)
		wg.Wait()
		<-monitorDone
		return err
	case <-time.After(run):
	}
	close(stop)
	<-monitorDone
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("a caller did not return 10 s after the load stopped")
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	if p := maxPending.Load(); p > int64(callers) {
		return fmt.Errorf("backlog of %d undelivered events, more than one per caller (%d)", p, callers)
	}
	return nil
}
