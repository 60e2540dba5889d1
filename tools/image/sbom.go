package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// spdxDocument is the part of SPDX 2.3 (JSON) that the SBOM uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string         `json:"name"`
	SPDXID           string         `json:"SPDXID"`
	VersionInfo      string         `json:"versionInfo"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// SBOM is an SPDX 2.3 JSON document listing what the Go binary at path was built from: the build info that
// `go version -m` prints (main module, every dependency module with its version, the Go toolchain as stdlib).
// version replaces the main module's version, which a build from a checkout leaves as (devel).
func SBOM(path, version, platform string, created time.Time) ([]byte, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("binaries: %s: no Go build info: %w", path, err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bin)
	mainPath := bi.Main.Path
	if mainPath == "" {
		mainPath = bi.Path
	}
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              "qleet-" + version + "-" + strings.ReplaceAll(platform, "/", "-"),
		DocumentNamespace: "https://github.com/qleetos/terraform-provider-qleet/spdx/qleet-" + version + "-" + strings.ReplaceAll(platform, "/", "-") + "-" + hex.EncodeToString(sum[:8]),
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: qleetos-tools-image", "Organization: QleetOS"},
		},
	}
	add := func(name, ver, purl string, checksums []spdxChecksum) string {
		id := fmt.Sprintf("SPDXRef-Package-%d", len(doc.Packages))
		p := spdxPackage{Name: name, SPDXID: id, VersionInfo: ver, DownloadLocation: "NOASSERTION", Checksums: checksums,
			ExternalRefs: []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl}}}
		doc.Packages = append(doc.Packages, p)
		return id
	}
	mainID := add(mainPath, version, "pkg:golang/"+mainPath+"@"+version,
		[]spdxChecksum{{Algorithm: "SHA256", Value: hex.EncodeToString(sum[:])}})
	doc.Packages[0].PrimaryPurpose = "APPLICATION"
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", mainID})
	goVer := strings.TrimPrefix(bi.GoVersion, "go")
	stdID := add("stdlib", bi.GoVersion, "pkg:golang/stdlib@"+goVer, nil)
	doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", stdID})
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		id := add(d.Path, d.Version, "pkg:golang/"+d.Path+"@"+d.Version, nil)
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	return json.MarshalIndent(doc, "", "  ")
}
