package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
)

// Image is a pack set as a load for matching leaves it (Loader.MatchingOnly), in a
// form that can be written out as data and read back without parsing YAML or a
// regex: the packs, without their rules' tests and sources, and what matching
// reads of the syntax of each of their regexes. The built-in packs ship as one
// (rules/packs), generated from their YAML files and used only while the digest
// of those files (FilesDigest) is the one it was generated from.
type Image struct {
	Packs []*Pack
	// Regexes are the packs' regexes, by expression (sorted, each once).
	Regexes []RegexImage
}

// RegexImage is what matching reads of a regex's syntax (see regex): parsing and
// analysing the ~400 regexes of the built-in packs is a large part of their load.
type RegexImage struct {
	Expr          string
	Literals      []string
	Sets          [][]string
	Anchored      bool
	StartAnchored bool
	Names         []string
}

// NewImage makes the image of packs loaded (and so validated) for matching.
func NewImage(packs []*Pack) (*Image, error) {
	byExpr := map[string]*regex{}
	for _, p := range packs {
		for i := range p.Spec.Rules {
			r := &p.Spec.Rules[i]
			if len(r.Tests)+len(r.Sources)+len(r.BenignSources) > 0 {
				return nil, fmt.Errorf("%s: rule %s: an image holds what matching needs, not tests or sources", p.File, r.ID)
			}
			if r.Match == nil {
				continue
			}
			if r.re == nil || len(r.companionRes) != len(r.Match.CompanionList()) {
				return nil, fmt.Errorf("%s: rule %s: its regexes were not validated", p.File, r.ID)
			}
			for _, re := range append([]*regex{r.re}, r.companionRes...) {
				byExpr[re.expr] = re
			}
		}
	}
	im := &Image{Packs: packs}
	for _, expr := range slices.Sorted(maps.Keys(byExpr)) {
		re := byExpr[expr]
		im.Regexes = append(im.Regexes, RegexImage{Expr: expr, Literals: re.literals, Sets: re.sets,
			Anchored: re.anchored, StartAnchored: re.startAnchored, Names: re.names})
	}
	return im, nil
}

// Load returns the image's packs, ready for Compile: each rule's regexes are
// attached from Regexes, as validation attaches them to the packs it parses. The
// image itself is left as it is, so that loads may share it: the packs and their
// rules are copies, what they point to (matches, labels, ladders) is the image's,
// which Compile and the engine only read.
func (im *Image) Load() ([]*Pack, error) {
	byExpr := make(map[string]*regex, len(im.Regexes))
	for _, ri := range im.Regexes {
		byExpr[ri.Expr] = &regex{expr: ri.Expr, literals: ri.Literals, sets: ri.Sets,
			anchored: ri.Anchored, startAnchored: ri.StartAnchored, names: ri.Names}
	}
	get := func(p *Pack, r *Rule, expr string) (*regex, error) {
		re, ok := byExpr[expr]
		if !ok {
			return nil, fmt.Errorf("image of %s: rule %s: regex %q is not in the image", p.File, r.ID, expr)
		}
		return re, nil
	}
	out := make([]*Pack, len(im.Packs))
	var err error
	for i, ip := range im.Packs {
		p := *ip
		p.Spec.Rules = slices.Clone(ip.Spec.Rules)
		for j := range p.Spec.Rules {
			r := &p.Spec.Rules[j]
			if r.Match == nil {
				continue
			}
			if r.re, err = get(&p, r, r.Match.Regex); err != nil {
				return nil, err
			}
			comps := r.Match.CompanionList()
			r.companionRes = make([]*regex, len(comps))
			for k, c := range comps {
				if r.companionRes[k], err = get(&p, r, c.Regex); err != nil {
					return nil, err
				}
			}
		}
		out[i] = &p
	}
	return out, nil
}

// FilesDigest is the SHA-256 of the pack files a load of dir in fsys reads (see
// LoadFS): their names and contents, in load order.
func FilesDigest(fsys fs.FS, dir string) (string, error) {
	files, err := yamlFiles(fsys, dir)
	if err != nil {
		return "", fmt.Errorf("pack files of %s: %w", dir, err)
	}
	h := sha256.New()
	for _, f := range files {
		data, err := fs.ReadFile(fsys, path.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("pack file: %w", err)
		}
		// Lengths first, so that no two sets of files hash alike.
		fmt.Fprintf(h, "%d:%s\n%d\n", len(f), f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
