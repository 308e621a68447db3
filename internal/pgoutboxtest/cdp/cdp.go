// Package cdp drives a headless Chromium through the DevTools protocol over
// --remote-debugging-pipe (file descriptors 3 and 4, NUL-separated JSON messages): no websocket,
// no library. Tests use it to load a page, type into and submit its forms, wait for a live
// update, switch the colour scheme and take screenshots, the way an operator's browser does.
package cdp

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Browser is one headless Chromium process.
type Browser struct {
	cmd     *exec.Cmd
	out     *os.File // our end of Chromium's fd 3
	mu      sync.Mutex
	next    int
	pending map[int]chan message
	events  chan message
	done    chan struct{}
}

type message struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

// Launch starts Chromium (bin) headless with a fresh profile; it is stopped when the test ends.
func Launch(t *testing.T, bin string) *Browser {
	t.Helper()
	chromeIn, ours, err := os.Pipe() // Chromium reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	theirs, chromeOut, err := os.Pipe() // Chromium writes fd 4
	if err != nil {
		t.Fatal(err)
	}
	// the profile is removed after the browser and its helper processes are gone (t.TempDir's
	// cleanup would race with them)
	dir, err := os.MkdirTemp("", "pgoutbox-cdp-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--hide-scrollbars", "--remote-debugging-pipe",
		"--user-data-dir="+filepath.Join(dir, "profile"), "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.ExtraFiles = []*os.File{chromeIn, chromeOut}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start chromium: %v", err)
	}
	chromeIn.Close()
	chromeOut.Close()
	b := &Browser{cmd: cmd, out: ours, pending: map[int]chan message{}, events: make(chan message, 4096), done: make(chan struct{})}
	go b.read(theirs)
	t.Cleanup(func() {
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		_, _ = b.call("", "Browser.close", nil)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cancel()
			<-exited
		}
		cancel()
		_ = ours.Close()
		<-b.done
		_ = os.RemoveAll(dir)
	})
	return b
}

func (b *Browser) read(f *os.File) {
	defer close(b.done)
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case b.events <- m:
		default: // nobody waits for old events
		}
	}
}

func (b *Browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	if params == nil {
		params = struct{}{}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	req, _ := json.Marshal(message{ID: id, Method: method, Params: p, SessionID: session})
	if _, err := b.out.Write(append(req, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s: no answer from chromium in 60 s", method)
	case <-b.done:
		return nil, fmt.Errorf("%s: chromium exited", method)
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	t       *testing.T
	session string
}

// NewPage opens a tab of width x height CSS pixels.
func (b *Browser) NewPage(t *testing.T, width, height int) *Page {
	t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		t.Fatal(err)
	}
	var tg struct{ TargetID string }
	_ = json.Unmarshal(res, &tg)
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true})
	if err != nil {
		t.Fatal(err)
	}
	var at struct{ SessionID string }
	_ = json.Unmarshal(res, &at)
	p := &Page{b: b, t: t, session: at.SessionID}
	p.Call("Page.enable", nil)
	p.Call("Runtime.enable", nil)
	p.Viewport(width, height)
	return p
}

// Call sends one protocol command to the tab; the test fails on an error.
func (p *Page) Call(method string, params any) json.RawMessage {
	p.t.Helper()
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		p.t.Fatal(err)
	}
	return res
}

// Viewport sets the layout size (a narrow width shows the small-screen layout).
func (p *Page) Viewport(width, height int) {
	p.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false})
}

// ColorScheme emulates the system's light or dark preference (prefers-color-scheme).
func (p *Page) ColorScheme(scheme string) {
	p.Call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}})
}

func (p *Page) waitLoad(timeout time.Duration) {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-p.b.events:
			if m.Method == "Page.loadEventFired" && m.SessionID == p.session {
				return
			}
		case <-deadline:
			p.t.Fatalf("page load: no load event in %s", timeout)
		}
	}
}

func (p *Page) drainEvents() {
	for {
		select {
		case <-p.b.events:
		default:
			return
		}
	}
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	p.drainEvents()
	p.Call("Page.navigate", map[string]any{"url": url})
	p.waitLoad(60 * time.Second)
}

// Eval evaluates a JavaScript expression in the page and returns its JSON value.
func (p *Page) Eval(expr string) json.RawMessage {
	p.t.Helper()
	res := p.Call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	var r struct {
		Result struct {
			Value json.RawMessage
		}
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := json.Unmarshal(res, &r); err != nil {
		p.t.Fatal(err)
	}
	if r.ExceptionDetails != nil {
		p.t.Fatalf("eval %q: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	return r.Result.Value
}

// Text is the trimmed text content of the element with the id ("" when absent).
func (p *Page) Text(id string) string {
	p.t.Helper()
	var s string
	_ = json.Unmarshal(p.Eval(fmt.Sprintf(`(function(){var e=document.getElementById(%q);return e?e.textContent.trim():""})()`, id)), &s)
	return s
}

// HTML is the document's serialized DOM as the browser holds it now.
func (p *Page) HTML() string {
	p.t.Helper()
	var s string
	_ = json.Unmarshal(p.Eval(`document.documentElement.outerHTML`), &s)
	return s
}

// WaitText waits until the element's text satisfies ok (the page updates itself) and returns it.
func (p *Page) WaitText(id string, ok func(string) bool, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := p.Text(id)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("element %s: still %q after %s", id, got, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Fill sets the value of the form control with the id, as typing would (input event).
func (p *Page) Fill(id, value string) {
	p.t.Helper()
	p.Eval(fmt.Sprintf(`(function(){var e=document.getElementById(%q);if(!e){throw new Error("no element %s")}
e.focus();e.value=%q;e.dispatchEvent(new Event("input",{bubbles:true}));return true})()`, id, id, value))
}

// Submit clicks the submit button with the id and waits for the page the form posts to.
func (p *Page) Submit(buttonID string) {
	p.t.Helper()
	p.drainEvents()
	p.Eval(fmt.Sprintf(`(function(){var b=document.getElementById(%q);if(!b){throw new Error("no button %s")}
var d=b.closest("details");if(d){d.open=true}b.click();return true})()`, buttonID, buttonID))
	p.waitLoad(60 * time.Second)
}

// Screenshot is a PNG of the viewport, or of the whole page when full.
func (p *Page) Screenshot(full bool) []byte {
	p.t.Helper()
	res := p.Call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": full})
	var r struct{ Data string }
	_ = json.Unmarshal(res, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	return png
}
