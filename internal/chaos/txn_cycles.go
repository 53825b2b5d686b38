package chaos

import (
	"fmt"
	"strings"
)

// maxCycleReports bounds the cycles txnCycles describes (each strongly
// connected component yields one).
const maxCycleReports = 64

// txnCycles finds G1c: cycles in the graph of write-read dependencies
// between the transactions that may have committed (TxnOK and TxnInfo),
// an edge W -> R when R polled a value W wrote. byVal maps each written
// value to its transaction. Reads of TxnFail values are G1a and make no
// edge. It returns one description per strongly connected component
// with more than one transaction (Tarjan's algorithm, iterative), naming
// a cycle through it.
func txnCycles(txns []Txn, byVal map[string]*Txn) []string {
	index := map[*Txn]int{}
	for i := range txns {
		index[&txns[i]] = i
	}
	adj := make([][]wrEdge, len(txns))
	for r := range txns {
		if txns[r].Outcome == TxnFail {
			continue
		}
		seen := map[int]bool{}
		for _, rd := range txns[r].Reads {
			w := byVal[rd.Value]
			if w == nil || w.Outcome == TxnFail {
				continue
			}
			wi := index[w]
			if wi == r || seen[wi] {
				continue
			}
			seen[wi] = true
			adj[wi] = append(adj[wi], wrEdge{r, rd.Value})
		}
	}

	// Tarjan's strongly connected components, with an explicit stack.
	const unvisited = -1
	idx := make([]int, len(txns))
	low := make([]int, len(txns))
	on := make([]bool, len(txns))
	for i := range idx {
		idx[i] = unvisited
	}
	var stack []int
	var out []string
	next := 0
	type frame struct{ v, e int }
	for root := range txns {
		if idx[root] != unvisited || len(adj[root]) == 0 {
			continue
		}
		call := []frame{{root, 0}}
		idx[root], low[root] = next, next
		next++
		stack = append(stack, root)
		on[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.e < len(adj[f.v]) {
				w := adj[f.v][f.e].to
				f.e++
				if idx[w] == unvisited {
					idx[w], low[w] = next, next
					next++
					stack = append(stack, w)
					on[w] = true
					call = append(call, frame{w, 0})
				} else if on[w] {
					low[f.v] = min(low[f.v], idx[w])
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] != idx[v] {
				continue
			}
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 && len(out) < maxCycleReports {
				in := map[int]bool{}
				for _, c := range comp {
					in[c] = true
				}
				out = append(out, describeCycle(txns, adj, comp[0], in))
			}
		}
	}
	return out
}

// wrEdge is a write-read dependency: transaction to read value, which the
// edge's source wrote.
type wrEdge struct {
	to    int
	value string
}

// describeCycle finds, by breadth-first search inside the component in,
// the shortest path from start back to itself and names its steps.
func describeCycle(txns []Txn, adj [][]wrEdge, start int, in map[int]bool) string {
	type step struct {
		from  int
		value string
	}
	prev := map[int]step{}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range adj[v] {
			if _, ok := prev[e.to]; ok || !in[e.to] {
				continue
			}
			prev[e.to] = step{v, e.value}
			queue = append(queue, e.to)
		}
		if _, ok := prev[start]; ok {
			break
		}
	}
	if _, ok := prev[start]; !ok {
		return fmt.Sprintf("write-read cycle through %s (not traced)", txns[start].ID)
	}
	var steps []string
	for v := start; ; {
		s := prev[v]
		steps = append(steps, fmt.Sprintf("%s (%s) read %q of %s", txns[v].ID, txns[v].Outcome, s.value, txns[s.from].ID))
		if v = s.from; v == start {
			break
		}
	}
	return fmt.Sprintf("write-read cycle of %d transactions: %s", len(steps), strings.Join(steps, "; "))
}
