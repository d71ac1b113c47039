package translate

// Owner is the gateway instance that holds a parked call (forward bridge)
// or a round waiting for a legacy client's answers (reverse bridge).
type Owner struct {
	// Instance is the owner's instance id.
	Instance string
	// Address is the owner's advertised base URL, taken only from sealed
	// data ("" when the owner advertises none, or when what named it did
	// not open): a client can never choose it.
	Address string
}
