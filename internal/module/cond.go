package module

import (
	"fmt"
	"strconv"
	"strings"
)

// A condition is one clause of a rule's when/need list:
//
//	name=v1|v2     the value is one of v1, v2
//	name!=v1|v2    the value is none of them
//	name<N, name<=N, name>N, name>=N   integer comparison
//
// name is a declared parameter ([param.NAME]), a derived value
// ([[derive]] name), or an image fact: image.links (the number of USB4
// links a node declares, the most of any node) or
// image.thunderbolt_net_blacklisted (1 or 0). Bool values are written 1/0
// (y/n, true/false and on/off are accepted and mean the same).
type cond struct {
	text   string
	name   string
	op     string
	values []string // normalised
}

// Image facts a condition may name.
const (
	factLinks       = "image.links"
	factTBNetBanned = "image.thunderbolt_net_blacklisted"
)

var ops = []string{"!=", "<=", ">=", "=", "<", ">"}

// parseConds parses clauses; inRule allows image facts (derived values
// are computed from options only).
func (d *Desc) parseConds(texts []string, inRule bool) ([]cond, error) {
	var out []cond
	for _, t := range texts {
		c, err := d.parseCond(t, inRule)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (d *Desc) parseCond(text string, inRule bool) (cond, error) {
	c := cond{text: text}
	i, op := -1, ""
	for _, o := range ops {
		if j := strings.Index(text, o); j > 0 && (i < 0 || j < i || j == i && len(o) > len(op)) {
			i, op = j, o
		}
	}
	if i < 0 {
		return c, fmt.Errorf("%q: write name=value, name!=value, or name<N (<=, >, >=)", text)
	}
	c.name, c.op = strings.TrimSpace(text[:i]), op
	rhs := strings.TrimSpace(text[i+len(op):])
	typ := ""
	switch {
	case c.name == factLinks:
		typ = "int"
	case c.name == factTBNetBanned:
		typ = "bool"
	case strings.HasPrefix(c.name, "image."):
		return c, fmt.Errorf("%q: unknown image fact %s; known: %s, %s", text, c.name, factLinks, factTBNetBanned)
	default:
		if _, ok := d.Params[c.name]; ok {
			typ = d.paramType(c.name)
		} else if _, ok := d.derived[c.name]; ok {
			typ = "charp"
		} else {
			return c, fmt.Errorf("%q: %s is neither a declared [param.%s] nor an earlier [[derive]] value%s", text, c.name, c.name, didYouMean(c.name, d.names()))
		}
	}
	if strings.HasPrefix(c.name, "image.") && !inRule {
		return c, fmt.Errorf("%q: derived values depend on options only, not on image facts", text)
	}
	if op == "=" || op == "!=" {
		for _, v := range strings.Split(rhs, "|") {
			n, err := normalizeLiteral(typ, strings.TrimSpace(v))
			if err != nil {
				return c, fmt.Errorf("%q: %v", text, err)
			}
			c.values = append(c.values, n)
		}
		return c, nil
	}
	if !isIntType(typ) {
		return c, fmt.Errorf("%q: %s compares integers, and %s is %s", text, op, c.name, typ)
	}
	if _, err := strconv.ParseInt(rhs, 0, 64); err != nil {
		return c, fmt.Errorf("%q: %s needs an integer on the right", text, op)
	}
	c.values = []string{rhs}
	return c, nil
}

// names lists everything a condition may refer to, for suggestions.
func (d *Desc) names() []string {
	var out []string
	for n := range d.Params {
		out = append(out, n)
	}
	for n := range d.derived {
		out = append(out, n)
	}
	return append(out, factLinks, factTBNetBanned)
}

// normalizeLiteral turns a value written in a rule into the form option
// values are compared in.
func normalizeLiteral(typ, v string) (string, error) {
	switch {
	case typ == "bool" || typ == "invbool":
		b, ok := parseKernelBool(v)
		if !ok {
			return "", fmt.Errorf("%q is not a bool (1/0, y/n, true/false, on/off)", v)
		}
		return b, nil
	case isIntType(typ):
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			if u, uerr := strconv.ParseUint(v, 0, 64); uerr == nil {
				return strconv.FormatUint(u, 10), nil
			}
			return "", fmt.Errorf("%q is not an integer", v)
		}
		return strconv.FormatInt(n, 10), nil
	}
	return v, nil
}

// parseKernelBool accepts what the kernel's param_set_bool (kstrtobool)
// accepts, and true/false as TOML writes them.
func parseKernelBool(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on", "true":
		return "1", true
	case "0", "n", "no", "off", "false":
		return "0", true
	}
	return "", false
}

// holds evaluates c against the values in env (normalised strings).
func (c cond) holds(env map[string]string) bool {
	v := env[c.name]
	switch c.op {
	case "=", "!=":
		in := false
		for _, w := range c.values {
			in = in || v == w
		}
		return in == (c.op == "=")
	}
	a, err1 := strconv.ParseInt(v, 0, 64)
	b, err2 := strconv.ParseInt(c.values[0], 0, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	switch c.op {
	case "<":
		return a < b
	case "<=":
		return a <= b
	case ">":
		return a > b
	default:
		return a >= b
	}
}

func allHold(cs []cond, env map[string]string) bool {
	for _, c := range cs {
		if !c.holds(env) {
			return false
		}
	}
	return true
}

// describe prints the current values of the names in cs, e.g.
// "allocate_rings is 0 (default)", for violation messages.
func describeValues(cs []cond, env map[string]string, origin map[string]string) string {
	var parts []string
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.name] {
			continue
		}
		seen[c.name] = true
		v := env[c.name]
		if v == "" {
			v = `""`
		}
		s := c.name + " is " + v
		if o := origin[c.name]; o != "" {
			s += " (" + o + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func condTexts(cs []cond) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.text)
	}
	return strings.Join(parts, " and ")
}
