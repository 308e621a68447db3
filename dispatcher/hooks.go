package dispatcher

// Hook points: named places in the delivery loop where Options.Hook, when set, is called with
// the point's name. The product never sets a hook; the crash tests do (SPEC T-3, R-AK-8), by
// running a dispatcher binary built with -tags failpoints whose hook kills or stops the process
// there (internal/pgoutboxtest/failpoint). A nil hook costs one comparison.
const (
	// HookBeforeClaim: just before claim_deliveries.
	HookBeforeClaim = "before_claim"
	// HookAfterClaim: the claim returned rows; no consumer called yet.
	HookAfterClaim = "after_claim"
	// HookAfterDeliver: the consumer acknowledged (its receipt is committed); the ack is not
	// recorded yet.
	HookAfterDeliver = "after_deliver"
	// HookAfterAck: the ack was recorded.
	HookAfterAck = "after_ack"
	// HookDuringBatchAck: ack_deliveries (two or more items) returned its rows inside its
	// transaction, which is not committed yet (R-AK-9: the group is all or nothing). With a hook
	// set, grouped acks run in an explicit transaction so that this point exists.
	HookDuringBatchAck = "during_batch_ack"
	// HookPipelinedClaim: a claim returned rows while deliveries of earlier claims were in their
	// transport call and an outcome group was waiting for its flush (issue 21 item 1).
	HookPipelinedClaim = "pipelined_claim"
)

// Hooks lists every hook point of the dispatcher.
var Hooks = []string{HookBeforeClaim, HookAfterClaim, HookAfterDeliver, HookAfterAck, HookDuringBatchAck, HookPipelinedClaim}

// hook calls the configured hook at point (nothing when none is set).
func (d *Dispatcher) hook(point string) {
	if d.hookFn != nil {
		d.hookFn(point)
	}
}
