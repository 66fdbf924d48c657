package webhooks_test

import (
	"io"
	"net/http"

	"github.com/tidemarkhq/tidemark/webhooks"
)

func httpPost(url string, body io.Reader, sig string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set(webhooks.TogglSignatureHeader, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
