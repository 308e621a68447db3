// Package readmodelfix holds the operator-console helpers that tests/readmodel, tests/intake and
// tests/projection share.
package readmodelfix

import (
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// ConsoleGet GETs u with c (nil: http.DefaultClient) and returns the status and body.
func ConsoleGet(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(u)
	testfix.Must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// ConsoleText is s without HTML tags, entities decoded.
func ConsoleText(s string) string {
	return html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(s, ""))
}

// ConsoleElem is the text content of the element with the given id, up to the first closing tag of
// its kind (the ids the tests read are on elements that do not nest their own kind).
func ConsoleElem(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<(\w+)[^>]*\sid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindStringSubmatchIndex(page)
	if m == nil {
		t.Fatalf("no element %s in:\n%s", id, page)
	}
	tag := page[m[2]:m[3]]
	rest := page[m[1]:]
	end := strings.Index(rest, "</"+tag+">")
	if end < 0 {
		t.Fatalf("element %s not closed", id)
	}
	return strings.TrimSpace(ConsoleText(rest[:end]))
}
