package proto

import (
	"strconv"
	"testing"
)

func TestAddCostHasNoFloatNoise(t *testing.T) {
	var sum, raw float64
	for i := 0; i < 173; i++ {
		sum = AddCost(sum, 0.0000025)
		raw += 0.0000025
	}
	if got := strconv.FormatFloat(sum, 'g', -1, 64); got != "0.0004325" {
		t.Fatalf("173 x 0.0000025 = %s (unrounded: %v)", got, raw)
	}
}
