package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A command's own flags (publish --mode, cleanup --keep, dlq replay --branch) are not
// settings: they mean different things to different commands. The environment and the config
// file still set them, each under the command's name, so that one flag never leaks into
// another command: OMNIGRAPH_<COMMAND>_<FLAG> (OMNIGRAPH_DLQ_REPLAY_MODE) and the file's
// <command> section (dlq_replay: {mode: merge}). The command line wins over the variable, the
// variable over the file, as for settings.

// Section is the config-file key and variable infix of a command: its path below the
// program's name with underscores ("dlq replay" is dlq_replay).
func Section(path string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(path), "_"), "-", "_")
}

// CommandKey is the config-file spelling of a command's flag (msg-id is msg_id).
func CommandKey(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// CommandEnv is the variable that sets flag of the command whose section is section.
func CommandEnv(section, flag string) string {
	return "OMNIGRAPH_" + strings.ToUpper(section+"_"+CommandKey(flag))
}

// CommandValue is a command flag's value from the environment or the config file.
type CommandValue struct {
	Flag, Value string
	// Source is the variable or "<file> line N", for errors that name it.
	Source string
}

// Sections names every command section and the flags each takes, so that a file with a
// misspelt section or flag is refused by every command that reads it, as a misspelt setting
// is. Without it, Load refuses any key that is not a setting.
func (l *Loader) Sections(all func() map[string][]string) *Loader {
	l.sections = all
	return l
}

// CommandValues returns the values the environment and the config file give to the flags of
// the command whose section is section (flags with dashes, as on the command line), the
// variable over the file. The caller applies those its command line did not give. Call it
// after the flag set is parsed.
func (l *Loader) CommandValues(section string, flags []string, getenv func(string) string) ([]CommandValue, error) {
	fromFile := map[string]CommandValue{}
	if file := l.configFile(getenv); file != "" {
		vals, err := readSection(file, section, flags)
		if err != nil {
			return nil, err
		}
		fromFile = vals
	}
	var out []CommandValue
	for _, f := range flags {
		env := CommandEnv(section, f)
		if v := getenv(env); v != "" {
			out = append(out, CommandValue{Flag: f, Value: v, Source: env})
			continue
		}
		if v, ok := fromFile[f]; ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// configFile is the --config flag, or the OMNIGRAPH_CONFIG variable when it is not given.
func (l *Loader) configFile(getenv func(string) string) string {
	if l.Flagged("config") {
		return *l.file
	}
	return getenv(ConfigEnv)
}

// readSection reads the section of the YAML file: a mapping of flag keys to scalars.
func readSection(file, section string, flags []string) (map[string]CommandValue, error) {
	entries, err := fileEntries(file)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(entries, func(e entry) bool { return e.key.Value == section })
	if i < 0 {
		return nil, nil
	}
	node := entries[i].value
	out := map[string]CommandValue{}
	err = eachSectionKey(file, section, node, flags, func(flag string, v *yaml.Node) {
		out[flag] = CommandValue{Flag: flag, Value: v.Value, Source: fmt.Sprintf("%s line %d", file, v.Line)}
	})
	return out, err
}

// eachSectionKey calls f for each key of a command section, refusing a section that is not a
// mapping of the command's flags to scalars.
func eachSectionKey(file, section string, node *yaml.Node, flags []string, f func(flag string, v *yaml.Node)) error {
	where := func(n *yaml.Node) string { return fmt.Sprintf("%s line %d", file, n.Line) }
	if node.Kind != yaml.MappingNode {
		return &Error{Setting: section, Source: where(node), Reason: "a command section must map the command's flags to values"}
	}
	known := map[string]string{}
	for _, fl := range flags {
		known[CommandKey(fl)] = fl
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			return &Error{Setting: section + "." + k.Value, Source: where(k), Reason: fmt.Sprintf("set twice (first on line %d)", first)}
		}
		seen[k.Value] = k.Line
		fl, ok := known[k.Value]
		if !ok {
			return &Error{Setting: section + "." + k.Value, Source: where(k), Reason: "unknown flag of this command (its settings go at the top of the file)"}
		}
		if v.Kind != yaml.ScalarNode {
			return &Error{Setting: section + "." + k.Value, Source: where(v), Reason: "want a single value"}
		}
		f(fl, v)
	}
	return nil
}
