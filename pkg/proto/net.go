package proto

// The fetch syscall (issue 7): an HTTP request an agent makes under its
// policy's [net] section, through the kernel.
const (
	// OpNetFetch fetches a URL for an agent.
	OpNetFetch = "net.fetch"
	// RecordFetch is the record type of FetchRecord.
	RecordFetch = "fetch"
)

// Error codes of a fetch that the kernel allowed but the network failed.
const (
	ETIMEDOUT    = "ETIMEDOUT"    // the fetch took longer than its timeout
	ECONNREFUSED = "ECONNREFUSED" // nothing listens at the host's port
	EHOSTUNREACH = "EHOSTUNREACH" // the host did not resolve or answer (DNS, TLS, a broken reply)
)

// Fetch methods.
const (
	MethodGet  = "GET"
	MethodHead = "HEAD"
	MethodPost = "POST"
)

// FetchArgs are the args of net.fetch. Method is GET (the default), HEAD
// or POST (with Body). Timeout is a Go duration, capped by the policy's.
type FetchArgs struct {
	Agent   string            `json:"agent"`
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Timeout string            `json:"timeout,omitempty"`
}

// FetchRecord is the "fetch" record: the result of a fetch. Body is the
// response body up to the policy's net.max_bytes: text as itself, other
// bytes as base64 with Encoding "base64" (see EncodeValue).
type FetchRecord struct {
	Type        string `json:"type"` // always "fetch"
	Agent       string `json:"agent"`
	Run         string `json:"run,omitempty"`
	Method      string `json:"method"`
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"` // after redirects
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        string `json:"body"`
	Encoding    string `json:"encoding,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	// Bytes is the length of the body as received (up to the cap).
	Bytes int64 `json:"bytes"`
	// Digest is the blake3 of the body as received, as the audit log has it.
	Digest   string  `json:"digest"`
	Duration float64 `json:"duration"` // seconds
	Text     string  `json:"text"`
}
