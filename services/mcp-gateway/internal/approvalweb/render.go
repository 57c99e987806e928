package approvalweb

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
)

//go:embed page.html
var templateFS embed.FS

// pageTemplate holds one template per view and the layout they share.
// html/template escapes everything put in them by context: a command line
// is shown exactly, never interpreted.
var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"row":      func(r requestView, csrf string) rowData { return rowData{Request: r, CSRF: csrf} },
	"emptyRow": func() requestView { return requestView{} },
}).ParseFS(templateFS, "page.html"))

// rowData is one request's row with the session's CSRF token for its
// forms; the row template in the page, which the script clones for new
// requests, has an empty one the script fills in.
type rowData struct {
	Request requestView
	CSRF    string
}

// Views, one per template.
type (
	indexView struct {
		Who      string
		Roles    []string
		CSRF     string
		Flash    string
		FlashBad bool
		Scope    string
		Pending  []requestView
	}
	signInView struct {
		OIDC    bool
		Issuer  string
		Message string
		Bad     bool
	}
	notApproverView struct {
		Who   string
		Roles string
		CSRF  string
	}
	signedInView struct {
		Who string
	}
	messageView struct {
		Title   string
		Message string
		Bad     bool
	}
)

// layoutData is what the layout gets: the view, its template's name and
// the response's CSP nonce.
type layoutData struct {
	Nonce string
	Name  string
	Title string
	View  any
}

// render writes view with status inside the layout.
func (p *Page) render(w http.ResponseWriter, r *http.Request, status int, view any) {
	d := layoutData{View: view}
	d.Nonce, _ = r.Context().Value(nonceKey{}).(string)
	switch v := view.(type) {
	case indexView:
		d.Name, d.Title = "index", "Approvals"
	case signInView:
		d.Name, d.Title = "signin", "Sign in: approvals"
	case notApproverView:
		d.Name, d.Title = "notapprover", "Not an approver"
	case signedInView:
		d.Name, d.Title = "signedin", "Signed in"
	case messageView:
		d.Name, d.Title = "message", v.Title
	default:
		panic("approvalweb: no template for the view")
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "layout", d); err != nil {
		p.log.Error("rendering the approvals page", "template", d.Name, "error", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderSignIn shows how to sign in, with msg above it.
func (p *Page) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string, bad bool) {
	v := signInView{Message: msg, Bad: bad}
	if p.oidc != nil {
		v.OIDC, v.Issuer = true, p.oidc.cfg.Issuer
	}
	p.render(w, r, status, v)
}
