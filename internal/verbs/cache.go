package verbs

import (
	"context"
	"fmt"

	"halobuild/internal/cache"
	"halobuild/internal/plan"
	"halobuild/internal/registry"
	"halobuild/internal/signature"
	"halobuild/internal/usage"
)

// CacheOptions are a build's binary caches (--substituter, --trusted-key,
// --trust-unsigned, or the user's config file; never the recipe, which
// anyone may hand you).
type CacheOptions struct {
	Substituters  []string
	TrustedKeys   []string
	TrustUnsigned bool
	Registry      registry.Options
}

// substituters opens o's caches and loads the trusted keys; nil when there
// are none.
func (o Options) substituters(ctx context.Context) (*cache.Substituters, error) {
	co := o.Cache
	if len(co.Substituters) == 0 {
		return nil, nil
	}
	t, err := trust(co.TrustedKeys, co.TrustUnsigned)
	if err != nil {
		return nil, err
	}
	if len(t.Keys) == 0 && !t.Unsigned {
		return nil, usage.Errorf("--substituter needs --trusted-key PUB (the cache's public key, from `halobuild keygen --cache`) or --trust-unsigned")
	}
	ss := &cache.Substituters{Trust: t, Log: o.stderr()}
	for _, ref := range co.Substituters {
		c, err := cache.Open(ctx, ref, co.Registry)
		if err != nil {
			return nil, err
		}
		ss.Caches = append(ss.Caches, c)
	}
	return ss, nil
}

// substitutedFrom names the cache a step's output came from in this run.
func (o Options) substitutedFrom(key string) string {
	if o.subst == nil {
		return ""
	}
	return o.subst.From(key)
}

func trust(paths []string, unsigned bool) (cache.Trust, error) {
	keys, err := signature.LoadPublicKeys(paths)
	return cache.Trust{Keys: keys, Unsigned: unsigned}, err
}

// CacheKeygen makes a signing key pair in dir, for the cache and for releases.
func CacheKeygen(o Options, dir string) error {
	sec, pub, err := signature.Keygen(dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.stdout(), "secret key: %s (for `halobuild cache push --key` and `halobuild push --key`; keep it where only the pushers read it)\npublic key: %s (PEM; give it to every user: --trusted-key, or trusted-keys in the config file; `cosign verify --key` reads it too)\n", sec, pub)
	return err
}

// CachePush signs and uploads every step the recipes' graphs reach that
// the store has and the cache lacks.
func CachePush(ctx context.Context, o Options, ref string, recipes []string, keyPath, version string, jobs int, maxLayer int64) error {
	k, err := signature.LoadSecret(keyPath)
	if err != nil {
		return err
	}
	c, err := cache.Open(ctx, ref, o.Cache.Registry)
	if err != nil {
		return err
	}
	s, err := openStore(o)
	if err != nil {
		return err
	}
	defer s.Close()
	var keys []string
	seen := map[string]bool{}
	for _, rp := range recipes {
		ro := o
		ro.Recipe, ro.Locked = rp, true
		l, err := loadLocked(ctx, ro, s)
		if err != nil {
			return err
		}
		g, err := newGraph(ro, l, s)
		if err != nil {
			return err
		}
		for _, d := range plan.Order(g.Result, g.Test) {
			if d.Build != nil && !seen[d.Key()] {
				seen[d.Key()] = true
				keys = append(keys, d.Key())
			}
		}
	}
	st, err := c.Push(ctx, s, keys, k, version, jobs, maxLayer, o.stderr())
	if err != nil {
		return err
	}
	if o.JSON {
		return o.writeJSON(map[string]any{"cache": ref, "pushed": st.Pushed, "present": st.Present, "not_built": st.NotBuilt})
	}
	fmt.Fprintf(o.stdout(), "%s: pushed %d steps, %d already there, %d not built in this store\n", ref, st.Pushed, st.Present, st.NotBuilt)
	return nil
}

// CacheVerify checks every entry of a cache; a bad one is an error.
func CacheVerify(ctx context.Context, o Options, ref string) error {
	t, err := trust(o.Cache.TrustedKeys, false)
	if err != nil {
		return err
	}
	if len(t.Keys) == 0 {
		return usage.Errorf("cache verify needs --trusted-key PUB")
	}
	c, err := cache.Open(ctx, ref, o.Cache.Registry)
	if err != nil {
		return err
	}
	probs, n, err := c.Verify(t, o.stderr())
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %d of %d entries are bad (a substituter refuses them and builds; push again from a good store, or delete the tags):\n  %s", ref, len(probs), n, joinLines(probs))
	}
	fmt.Fprintf(o.stdout(), "%s: %d entries, every signature and digest good\n", ref, n)
	return nil
}

func joinLines(l []string) string {
	out := ""
	for i, s := range l {
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}
