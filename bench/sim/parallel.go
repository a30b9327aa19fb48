package sim

import "sync"

// Parallel runs job(0), job(1), ... job(n-1) on workers goroutines (at
// least 1), starting them in index order. Replays share nothing, so they
// run side by side; each is single-threaded and deterministic. After a
// job fails no further job starts; Parallel returns the error of the
// lowest failed index, or nil.
func Parallel(workers, n int, job func(i int) error) error {
	var (
		mu     sync.Mutex
		next   int
		failed = -1
		first  error
		wg     sync.WaitGroup
	)
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next == n || failed >= 0 {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := job(i); err != nil {
					mu.Lock()
					if failed < 0 || i < failed {
						failed, first = i, err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
