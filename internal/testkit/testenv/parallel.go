package testenv

import (
	"errors"
	"sync"
)

// twoAtATime calls do for 0..n-1, two calls at a time (this project's machines have two
// cores, and each call here is mostly one core's compression), and returns every error.
func twoAtATime(n int, do func(i int) error) error {
	errs := make([]error, n)
	limit := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			errs[i] = do(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
