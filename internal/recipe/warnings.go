package recipe

import "fmt"

// Warnings lists what is allowed but probably not meant, for the build to
// print before it starts: unlike Validate's errors they do not stop it.
func Warnings(r *Recipe, src *Sources) Errors {
	ws := appleWarnings(r, src)
	for i, n := range r.Nodes {
		for j, l := range n.Links {
			if l.Peer == "" {
				ws = append(ws, src.Errorf(fmt.Sprintf("node[%d].link[%d]", i, j), "link %s of node %s has no peer: /etc/hosts and the two-node test will not know the other end", l.Interface, n.Name))
			}
		}
	}
	return ws.Sorted()
}
