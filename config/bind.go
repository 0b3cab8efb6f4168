package config

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Loader merges the settings one command takes. Bind declares them on the command's flag set;
// after the flag set is parsed, Load applies defaults, the --config file, OMNIGRAPH_* variables
// and flags, in that order, to those settings only: a command reads no variable and no file
// key of a setting it does not take, though an unknown key in the file is still refused.
type Loader struct {
	fs       *flag.FlagSet
	defaults Config
	names    []string
	required []string
	file     *string
	vals     map[string]*string
	// sections, when set, lists the command sections a config file may hold (Sections).
	sections func() map[string][]string
}

// Bind declares --config and a flag per named setting (its name with dashes: nats_url is
// --nats-url) on fs, each listing its variable and its default from defaults. Unknown names
// panic: they are the caller's constants.
func Bind(fs *flag.FlagSet, defaults Config, names ...string) *Loader {
	l := &Loader{fs: fs, defaults: defaults, names: names, vals: map[string]*string{}}
	l.file = fs.String("config", "", "YAML config file (env "+ConfigEnv+")")
	for _, name := range names {
		s, ok := lookup(name)
		if !ok {
			panic("config: Bind of unknown setting " + name)
		}
		help := s.help + " (env " + EnvName(name) + ")"
		// The default is shown only: Load applies a flag only when it was given, so that the
		// file and the environment can set what the command line leaves alone.
		v := &flagValue{text: s.get(&defaults), kind: s.kind}
		fs.Var(v, flagName(name), help)
		l.vals[name] = &v.text
	}
	return l
}

// flagValue is a setting's flag: its text, checked by Load (which knows the setting and the
// source to name), and its kind for help. Type makes a command library that wraps Go flags
// (spf13/pflag) show the kind rather than "string".
type flagValue struct{ text, kind string }

func (v *flagValue) String() string     { return v.text }
func (v *flagValue) Set(s string) error { v.text = s; return nil }
func (v *flagValue) Type() string       { return v.kind }

// Require makes Load refuse a config in which any of names is empty; a name "a|b" requires
// one of a and b.
func (l *Loader) Require(names ...string) *Loader {
	l.required = append(l.required, names...)
	return l
}

// Flagged reports whether the setting name was given on the command line (after Parse).
func (l *Loader) Flagged(name string) bool {
	given := false
	l.fs.Visit(func(f *flag.Flag) { given = given || f.Name == flagName(name) })
	return given
}

// Load merges the bound settings and validates them. Call it after the flag set is parsed;
// getenv is os.Getenv outside tests.
func (l *Loader) Load(getenv func(string) string) (*Config, error) {
	c := l.defaults
	// sources is where each set value came from, so that a refusal names it.
	sources := map[string]string{}
	bound := func(name string) bool { return slices.Contains(l.names, name) }
	if file := l.configFile(getenv); file != "" {
		if err := l.applyFile(&c, file, bound, sources); err != nil {
			return nil, err
		}
	}
	for _, name := range l.names {
		s, _ := lookup(name)
		env := EnvName(name)
		v := getenv(env)
		if v == "" && name == "nats_url" {
			// Every NATS tool honours NATS_URL; ours does too, below its own spelling.
			env = NATSURLEnv
			v = getenv(env)
		}
		if v != "" {
			if err := s.set(&c, v); err != nil {
				return nil, &Error{Setting: name, Source: env, Reason: err.Error()}
			}
			sources[name] = env
		}
	}
	for _, name := range l.names {
		if !l.Flagged(name) {
			continue
		}
		s, _ := lookup(name)
		if err := s.set(&c, *l.vals[name]); err != nil {
			return nil, &Error{Setting: name, Source: "--" + flagName(name), Reason: err.Error()}
		}
		sources[name] = "--" + flagName(name)
	}
	if err := c.validate(l.names, l.required, sources); err != nil {
		return nil, err
	}
	return &c, nil
}

// entry is one top-level key of a config file and its value.
type entry struct {
	key, value *yaml.Node
	where      string // "<file> line N" of the key
}

// fileEntries reads the config file's top-level keys in file order (so that of two bad keys
// the first is named), refusing a file that is not a mapping or sets a key twice.
func fileEntries(file string) ([]entry, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{Setting: "config", Source: file, Reason: err.Error()}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, &Error{Setting: "config", Source: file, Reason: err.Error()}
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, &Error{Setting: "config", Source: file, Reason: "want a mapping of settings to values"}
	}
	var out []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		e := entry{key: top.Content[i], value: top.Content[i+1], where: fmt.Sprintf("%s line %d", file, top.Content[i].Line)}
		if first, dup := seen[e.key.Value]; dup {
			return nil, &Error{Setting: e.key.Value, Source: e.where, Reason: fmt.Sprintf("set twice (first on line %d)", first)}
		}
		seen[e.key.Value] = e.key.Line
		out = append(out, e)
	}
	return out, nil
}

// applyFile sets the bound settings the YAML file names. Every key must be a setting, bound
// or not: one file serves every command, and a misspelt key is refused wherever it is read.
func (l *Loader) applyFile(c *Config, file string, bound func(string) bool, sources map[string]string) error {
	entries, err := fileEntries(file)
	if err != nil {
		return err
	}
	for _, e := range entries {
		k, node, where := e.key.Value, *e.value, e.where
		s, ok := lookup(k)
		if !ok && l.sections != nil {
			if flags, isSection := l.sections()[k]; isSection {
				if err := eachSectionKey(file, k, &node, flags, func(string, *yaml.Node) {}); err != nil {
					return err
				}
				continue
			}
		}
		if !ok {
			name := k
			if name == "" {
				name = `""` // an empty key, named visibly
			}
			return &Error{Setting: name, Source: where, Reason: "unknown setting"}
		}
		v := node.Value
		if node.Kind == yaml.SequenceNode || node.Kind == yaml.MappingNode {
			if !slices.Contains(listSettings, k) || node.Kind == yaml.MappingNode {
				return &Error{Setting: k, Source: where, Reason: "want a single value, not a YAML " + map[bool]string{true: "list", false: "mapping"}[node.Kind == yaml.SequenceNode]}
			}
			items := make([]string, 0, len(node.Content))
			for _, item := range node.Content {
				if item.Kind != yaml.ScalarNode || strings.Contains(item.Value, ",") {
					return &Error{Setting: k, Source: fmt.Sprintf("%s line %d", file, item.Line), Reason: "want a list of plain names"}
				}
				items = append(items, item.Value)
			}
			v = strings.Join(items, ",")
		}
		if !bound(k) {
			continue
		}
		if err := s.set(c, v); err != nil {
			return &Error{Setting: k, Source: where, Reason: err.Error()}
		}
		sources[k] = where
	}
	return nil
}
