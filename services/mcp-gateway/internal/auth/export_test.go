package auth

import "net/http"

// Mount serves [Verifier.MetadataHandler] on mux at every path of
// [Verifier.MetadataPaths], as the gateway does.
func (v *Verifier) Mount(mux *http.ServeMux) {
	h := v.MetadataHandler()
	for _, p := range v.MetadataPaths() {
		mux.Handle(p, h)
	}
}
