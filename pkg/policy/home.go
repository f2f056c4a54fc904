package policy

import (
	"bytes"
	"strings"
)

// An agent's home (issue 44): the fleet node whose policy and budget are
// the agent's. An agent made here is at home here, and its policy file
// says nothing of it. A run placed on this node from another (a fleet
// call) runs under its home's policy, which the call carries signed: the
// agent is a guest here, and its policy file is the home's text under
// one comment line naming the home and the text's version. A comment,
// so the file stays a policy that ox-policy show prints whole and Parse
// reads as it is, and one file, so the policy and its home change
// together in one durable write.

// homeMark starts the first line of a guest's policy file.
const homeMark = "# oxios: a guest of node "

// Home returns the home node a policy file names, and the version of the
// home's text; "" for an agent at home here.
func Home(text []byte) (node, version string) {
	if !bytes.HasPrefix(text, []byte(homeMark)) {
		return "", ""
	}
	line, _, _ := bytes.Cut(text[len(homeMark):], []byte("\n"))
	node, rest, _ := strings.Cut(string(line), " ")
	_, version, _ = strings.Cut(rest, "version ")
	version, _, _ = strings.Cut(version, " ")
	return node, version
}

// WithHome is the policy file of a guest of node: the home's text (of
// version) under the line that names them.
func WithHome(text []byte, node, version string) []byte {
	head := homeMark + node + " (its policy, version " + version + " ; set it there)\n"
	return append([]byte(head), text...)
}

// NamesHome reports whether text starts as a guest's file does: a policy
// an operator sets may not, since only a fleet call makes a guest.
func NamesHome(text []byte) bool { return bytes.HasPrefix(text, []byte(homeMark)) }
