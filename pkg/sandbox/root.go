package sandbox

// ProbeRoot is Probe on a machine whose sandboxes build their roots in
// root, which it makes (PrepareRoot): when it cannot, there are no
// namespaces, and Missing says why.
func ProbeRoot(root string) Features {
	f := Probe()
	if err := PrepareRoot(root); err != nil {
		f.Namespaces = false
		f.Missing = append(f.Missing, "sandbox root: "+err.Error())
	}
	return f
}
