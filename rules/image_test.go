package rules_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
)

const imagePack = basePack + `    - id: group
      match:
        regex: 'NVRM: first'
        companions:
          - {regex: 'second line', within: {lines: 2}}
          - {regex: 'third line', within: {lines: 3}}
      tests:
        - line: 'NVRM: first'
`

func TestImageLoadsWhatItWasMadeOf(t *testing.T) {
	ps, err := rules.Loader{MatchingOnly: true}.ParseFile("p.yaml", []byte(imagePack))
	if err != nil {
		t.Fatal(err)
	}
	im, err := rules.NewImage(ps)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(im.Regexes); n != 5 {
		t.Fatalf("%d regexes in the image, want 5", n)
	}
	for range 2 { // a load leaves the image as it was
		got, err := im.Load()
		if err != nil || !reflect.DeepEqual(got, ps) {
			t.Fatalf("the image's load differs from the parsed packs (error %v)", err)
		}
	}
	im.Regexes = im.Regexes[1:]
	if _, err := im.Load(); err == nil || !strings.Contains(err.Error(), "not in the image") {
		t.Fatalf("an image without one of its regexes loads: %v", err)
	}
}

func TestImageHoldsOnlyWhatMatchingNeeds(t *testing.T) {
	ps, err := rules.Loader{}.ParseFile("p.yaml", []byte(imagePack))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rules.NewImage(ps); err == nil {
		t.Fatal("an image of packs with their tests was made")
	}
}
