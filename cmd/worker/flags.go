package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/omnigraph/omnigraph-worker/config"
)

// flagSet is a command's flags, with the config settings it binds (bindSettings), so that the
// command's own flags can be read from the same config file.
type flagSet struct {
	*pflag.FlagSet
	bound *boundSettings
	// from is where applyCommandFlags took an own flag's value: its variable, or its key in
	// the config file with the file and line (named).
	from map[string]string
}

// named is an own flag as the user set it, for an error about its value: --mode from the
// command line (or its default), OMNIGRAPH_PUBLISH_MODE from the environment,
// "publish.mode (worker.yaml line 3)" from the config file.
func (fs *flagSet) named(flag string) string {
	if fs == nil || fs.FlagSet == nil {
		return "--" + flag
	}
	if f := fs.Lookup(flag); f != nil && !f.Changed {
		if src, ok := fs.from[flag]; ok {
			return src
		}
	}
	return "--" + flag
}

// settingAnnotation marks the flags of config settings: config.Loader merges those; the
// command's own flags are set from the environment and the file by applyCommandFlags.
const settingAnnotation = "omnigraph/setting"

// commandLineOnly are flags no variable or file sets: --force and --confirm say "yes, now" to
// one destructive invocation, and a value left in an environment would say it to every later
// one.
var commandLineOnly = []string{"help", "config", "force", "confirm"}

// ownFlags are the flags of a command that the environment and the config file may set, by
// their command-line names.
func ownFlags(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if _, isSetting := f.Annotations[settingAnnotation]; isSetting || slices.Contains(commandLineOnly, f.Name) {
			return
		}
		out = append(out, f.Name)
	})
	return out
}

// describeOwnFlags adds its variable to the help of each of a command's own flags.
func describeOwnFlags(fs *pflag.FlagSet, section string) {
	for _, name := range ownFlags(fs) {
		f := fs.Lookup(name)
		f.Usage += " (env " + config.CommandEnv(section, name) + ")"
	}
}

// applyCommandFlags sets each of the command's own flags that its command line did not give
// from OMNIGRAPH_<COMMAND>_<FLAG> or the config file's <command> section. A command with no
// config settings reads no file.
func applyCommandFlags(fs *flagSet, section string) error {
	if fs.bound == nil {
		return nil
	}
	if err := fs.bound.sync(); err != nil {
		return err
	}
	vals, err := fs.bound.CommandValues(section, ownFlags(fs.FlagSet), getenv)
	if err != nil {
		return err
	}
	for _, v := range vals {
		f := fs.Lookup(v.Flag)
		value := v.Value
		if f.Value.Type() == "bool" {
			// The same spellings as on/off settings take.
			switch strings.ToLower(value) {
			case "on", "yes":
				value = "true"
			case "off", "no":
				value = "false"
			}
		}
		// A value the command line overrides is still checked, as a setting's is.
		given := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			return &config.Error{Setting: section + "." + config.CommandKey(v.Flag), Source: v.Source, Reason: err.Error()}
		}
		if f.Changed {
			if err := f.Value.Set(given); err != nil {
				return &usageError{msg: fmt.Sprintf("--%s %s: %v", f.Name, given, err)}
			}
			continue
		}
		if fs.from == nil {
			fs.from = map[string]string{}
		}
		fs.from[v.Flag] = v.Source
		if v.Source != config.CommandEnv(section, v.Flag) {
			fs.from[v.Flag] = fmt.Sprintf("%s.%s (%s)", section, config.CommandKey(v.Flag), v.Source)
		}
	}
	return nil
}

// commandTree is the command table, set in init: the table's builders reach commandSections,
// which reads the table, and Go refuses that cycle in a package variable's initialiser.
var commandTree func() []command

func init() { commandTree = func() []command { return commands } }

var (
	sectionsOnce sync.Once
	sections     map[string][]string
)

// commandSections are every command's section and own flags, for the config file's check of
// its keys: built once, from a command tree of its own.
func commandSections() map[string][]string {
	sectionsOnce.Do(func() {
		sections = map[string][]string{}
		root := &cobra.Command{Use: "worker"}
		for _, c := range commandTree() {
			root.AddCommand(c.cobra(c.name))
		}
		var walk func(cmd *cobra.Command)
		walk = func(cmd *cobra.Command) {
			for _, sub := range cmd.Commands() {
				if sub.HasSubCommands() {
					walk(sub)
					continue
				}
				sections[config.Section(strings.TrimPrefix(sub.CommandPath(), "worker "))] = ownFlags(sub.Flags())
			}
		}
		walk(root)
	})
	return sections
}
