package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// ChartImage is the image the chart in dir runs by default: values.yaml's image.repository, and the tag, which
// is values.yaml's image.tag or, when that is empty, Chart.yaml's appVersion.
func ChartImage(dir string) (repository, tag, appVersion string, err error) {
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &chart); err != nil {
		return "", "", "", err
	}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values); err != nil {
		return "", "", "", err
	}
	if values.Image.Repository == "" {
		return "", "", "", fmt.Errorf("chart: %s/values.yaml has no image.repository", dir)
	}
	tag = values.Image.Tag
	if tag == "" {
		tag = chart.AppVersion
	}
	return values.Image.Repository, tag, chart.AppVersion, nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("chart: %s: %w", path, err)
	}
	return nil
}
