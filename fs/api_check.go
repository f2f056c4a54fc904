package fs

import fusefs "github.com/hanwen/go-fuse/v2/fs"

// What each node and handle implements, checked at compile time in one
// place.

var (
	_ = (fusefs.NodeOnAdder)((*rootNode)(nil))
	_ = (fusefs.NodeLookuper)((*staticDir)(nil))
	_ = (fusefs.NodeOpendirHandler)((*staticDir)(nil))
	_ = (fusefs.NodeGetattrer)((*staticDir)(nil))
	_ = (fusefs.NodeAccesser)((*staticDir)(nil))
	_ = (fusefs.NodeStatfser)((*staticDir)(nil))
	_ = (fusefs.NodeUnlinker)((*staticDir)(nil))
	_ = (fusefs.NodeRmdirer)((*staticDir)(nil))
	_ = (fusefs.NodeCreater)((*staticDir)(nil))
	_ = (fusefs.NodeRenamer)((*staticDir)(nil))
	_ = (fusefs.NodeSetattrer)((*staticDir)(nil))

	_ = (fusefs.NodeLookuper)((*agentsNode)(nil))
	_ = (fusefs.NodeOpendirHandler)((*agentsNode)(nil))
	_ = (fusefs.NodeMkdirer)((*agentsNode)(nil))
	_ = (fusefs.NodeRmdirer)((*agentsNode)(nil))
	_ = (fusefs.NodeUnlinker)((*agentsNode)(nil))
	_ = (fusefs.NodeGetattrer)((*agentsNode)(nil))

	_ = (fusefs.NodeLookuper)((*dirNode)(nil))
	_ = (fusefs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (fusefs.NodeGetattrer)((*dirNode)(nil))
	_ = (fusefs.NodeSetattrer)((*dirNode)(nil))
	_ = (fusefs.NodeAccesser)((*dirNode)(nil))
	_ = (fusefs.NodeStatfser)((*dirNode)(nil))
	_ = (fusefs.NodeMkdirer)((*dirNode)(nil))
	_ = (fusefs.NodeRmdirer)((*dirNode)(nil))
	_ = (fusefs.NodeCreater)((*dirNode)(nil))
	_ = (fusefs.NodeMknoder)((*dirNode)(nil))
	_ = (fusefs.NodeUnlinker)((*dirNode)(nil))
	_ = (fusefs.NodeRenamer)((*dirNode)(nil))
	_ = (fusefs.NodeLinker)((*dirNode)(nil))
	_ = (fusefs.NodeSymlinker)((*dirNode)(nil))
	_ = (fusefs.NodeFsyncer)((*dirNode)(nil))

	_ = (fusefs.NodeGetattrer)((*fileNode)(nil))
	_ = (fusefs.NodeSetattrer)((*fileNode)(nil))
	_ = (fusefs.NodeAccesser)((*fileNode)(nil))
	_ = (fusefs.NodeOpener)((*fileNode)(nil))

	_ = (fusefs.FileReader)((*handle)(nil))
	_ = (fusefs.FileWriter)((*handle)(nil))
	_ = (fusefs.FileFlusher)((*handle)(nil))
	_ = (fusefs.FileFsyncer)((*handle)(nil))
	_ = (fusefs.FileReleaser)((*handle)(nil))
	_ = (fusefs.FileAllocater)((*handle)(nil))
	_ = (fusefs.FilePassthroughFder)((*ptHandle)(nil))

	_ = (fusefs.NodeOpener)((*genFile)(nil))
	_ = (fusefs.NodeGetattrer)((*genFile)(nil))
	_ = (fusefs.NodeSetattrer)((*genFile)(nil))
	_ = (fusefs.FileReader)((*bytesHandle)(nil))
	_ = (fusefs.NodeOpener)((*auditLog)(nil))
	_ = (fusefs.FileReader)((*auditHandle)(nil))

	_ = (fusefs.FileReaddirenter)((*listing)(nil))
	_ = (fusefs.FileLookuper)((*listing)(nil))
	_ = (fusefs.FileSeekdirer)((*listing)(nil))
	_ = (fusefs.FileReleasedirer)((*listing)(nil))
	_ = (fusefs.FileFsyncdirer)((*listing)(nil))
)
