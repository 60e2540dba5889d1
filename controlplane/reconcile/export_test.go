package reconcile

// HandedOver is how many notifications of id were handed to the worker that is reconciling it, and wait
// for it to finish: a test's signal that a notification sent while a reconcile runs has been taken over.
func (c *Controller[S, T]) HandedOver(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dirty[id])
}
