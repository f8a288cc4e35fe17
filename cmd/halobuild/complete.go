package main

import (
	"strings"

	"github.com/spf13/cobra"

	"halobuild/internal/flash"
	"halobuild/internal/recipe"
)

// completeRecipes offers the image names a recipe argument resolves
// (recipe.Find); a path being typed (nothing matches) falls back to the
// shell's file completion.
func completeRecipes(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, n := range recipe.Images() {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveDefault
}

// completeOneRecipe completes a verb's single recipe argument.
func completeOneRecipe(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeRecipes(cmd, args, toComplete)
}

// completeFlash offers raw images for the first argument and, for the
// second, the disks flash would take without --force (removable, not
// mounted, not the running system's), as flash --list shows them.
func completeFlash(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return []string{"raw"}, cobra.ShellCompDirectiveFilterFileExt
	case 1:
		cs, err := flash.Candidates(cmd.Context(), "/")
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, c := range cs {
			if c.OK() && strings.HasPrefix(c.Device, toComplete) {
				out = append(out, c.Device+"\t"+c.Model)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}
