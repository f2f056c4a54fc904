package fleet

import (
	"fmt"
	"strings"
)

// Permissions is the permissions block of node's NATS user in the
// servers' authorization (contrib/fleet/nats-hN.conf, fleet-keys prints
// it): what the node needs and nothing more, so that a node's key, if
// stolen, cannot pass for another node on the wire. The signatures and
// sealed replies already hold without it; this is defence in depth.
//
//   - It subscribes to the calls, pings and hash questions addressed to
//     it, to every node's heads, witness questions and call cancels, and
//     to its own inboxes (InboxPrefix), where its answers come.
//   - It publishes calls, pings, hash questions, cancels and records to
//     any node, but heads and witness questions only as itself, its own
//     entry in the nodes bucket only, and answers to requests it took.
//   - Of JetStream it may use the API, but not delete a stream, nor purge
//     or delete messages of the nodes bucket or the reply stream.
func Permissions(node string) string {
	q := func(s ...string) string {
		for i := range s {
			s[i] = fmt.Sprintf("%q", s[i])
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	pub := q(subjCall+"*", subjPing+"*", subjHash+"*", subjCancel+"*", subjReply+"*",
		subjHead+node, subjWitness+node, "$KV."+bucketNodes+"."+node, "$O."+bucketArgs+".>", "$JS.API.>")
	deny := q("$JS.API.STREAM.DELETE.>",
		"$JS.API.STREAM.PURGE.KV_"+bucketNodes, "$JS.API.STREAM.PURGE."+streamReply,
		"$JS.API.STREAM.MSG.DELETE.KV_"+bucketNodes, "$JS.API.STREAM.MSG.DELETE."+streamReply)
	sub := q(subjCall+node, subjPing+node, subjHash+node, subjHead+"*", subjWitness+"*", subjCancel+"*", InboxPrefix(node)+".>")
	return fmt.Sprintf("permissions: {\n  publish: {allow: %s,\n    deny: %s}\n  subscribe: {allow: %s}\n  allow_responses: true\n}", pub, deny, sub)
}
