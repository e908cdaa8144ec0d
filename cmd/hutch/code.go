package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/config"
)

// newCodeCmd is "hutch code": run_code's housekeeping.
func newCodeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "code",
		Short: "Prepare run_code: install its declared packages",
	}
	var configFile string
	install := &cobra.Command{
		Use:   "install --config FILE",
		Short: "Install the packages a settings file declares for run_code (code.packages), once, into its cache",
		Long: `Install the python and javascript packages a settings file declares under
code.packages, each language's list once, into the package cache (a list
already there is not installed again). Each install runs in an isolated
sandbox built from the default code sandbox that writes only a new cache
directory and reaches only the package index's host. hutch mcp does the
same on its first start with those settings; run this to do it ahead.
Prints the installed directories.`,
		Example: `  hutch code install --config hutch.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if configFile == "" {
				return fmt.Errorf("code install needs --config FILE, the settings file whose code.packages to install")
			}
			s, err := config.Load(configFile)
			if err != nil {
				return err
			}
			dirs, err := config.InstallCodePackages(c.Context(), s)
			if err != nil {
				return err
			}
			if len(dirs) == 0 {
				fmt.Fprintln(c.ErrOrStderr(), "no packages declared (code.packages): nothing to install")
			}
			for _, d := range dirs {
				fmt.Fprintln(c.OutOrStdout(), d)
			}
			return nil
		},
	}
	install.Flags().StringVar(&configFile, "config", "", "the settings file (YAML) declaring code.packages")
	c.AddCommand(install)
	return c
}
