package awssim

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type s3Object struct {
	data     []byte
	etag     string
	modified time.Time
	ctype    string
}

type bucket struct {
	Name    string
	created time.Time
	tags    map[string]string
	objects map[string]*s3Object
	account string
	region  string
}

// routeS3 routes a path-style S3 request: /, /bucket or /bucket/key.
func (s *Sim) routeS3(q *request) (string, handler, *apiError) {
	p := strings.TrimPrefix(q.r.URL.Path, "/")
	name, key, _ := strings.Cut(p, "/")
	qs := q.r.URL.Query()
	m := q.r.Method
	if name == "" {
		if m == http.MethodGet {
			return "ListBuckets", s.listBuckets, nil
		}
		return "Unknown", nil, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	}
	q.param("Bucket", name)
	if key != "" {
		q.param("Key", key)
		switch m {
		case http.MethodPut:
			return "PutObject", s.bucketOp(name, func(q *request, b *bucket) (*reply, *apiError) { return s.putObject(q, b, key) }), nil
		case http.MethodGet, http.MethodHead:
			action := "GetObject"
			if m == http.MethodHead {
				action = "HeadObject"
			}
			return action, s.bucketOp(name, func(q *request, b *bucket) (*reply, *apiError) { return s.getObject(q, b, key) }), nil
		case http.MethodDelete:
			return "DeleteObject", s.bucketOp(name, func(_ *request, b *bucket) (*reply, *apiError) {
				delete(b.objects, key)
				return &reply{status: http.StatusNoContent}, nil
			}), nil
		}
		return "Unknown", nil, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	}
	switch {
	case m == http.MethodPut && qs.Has("tagging"):
		return "PutBucketTagging", s.bucketOp(name, s.putBucketTagging), nil
	case m == http.MethodGet && qs.Has("tagging"):
		return "GetBucketTagging", s.bucketOp(name, s.getBucketTagging), nil
	case m == http.MethodDelete && qs.Has("tagging"):
		return "DeleteBucketTagging", s.bucketOp(name, func(_ *request, b *bucket) (*reply, *apiError) {
			b.tags = nil
			return &reply{status: http.StatusNoContent}, nil
		}), nil
	case m == http.MethodGet && qs.Has("location"):
		return "GetBucketLocation", s.bucketOp(name, func(_ *request, b *bucket) (*reply, *apiError) {
			loc := b.region
			if loc == "us-east-1" {
				loc = ""
			}
			return &reply{body: struct {
				XMLName xml.Name `xml:"LocationConstraint"`
				Xmlns   string   `xml:"xmlns,attr"`
				Value   string   `xml:",chardata"`
			}{Xmlns: nsS3, Value: loc}}, nil
		}), nil
	case m == http.MethodGet:
		return "ListObjectsV2", s.bucketOp(name, s.listObjects), nil
	case m == http.MethodPut && len(qs) == 0:
		return "CreateBucket", func(q *request) (*reply, *apiError) { return s.createBucket(q, name) }, nil
	case m == http.MethodHead:
		return "HeadBucket", s.bucketOp(name, func(_ *request, b *bucket) (*reply, *apiError) {
			return &reply{header: map[string]string{"X-Amz-Bucket-Region": b.region}}, nil
		}), nil
	case m == http.MethodDelete && len(qs) == 0:
		return "DeleteBucket", s.bucketOp(name, s.deleteBucket), nil
	}
	return "Unknown", nil, errorf(http.StatusNotImplemented, "NotImplemented", "The stand-in's S3 does not serve %s %s", m, q.r.URL.RequestURI())
}

func (s *Sim) bucketOp(name string, h func(q *request, b *bucket) (*reply, *apiError)) handler {
	return func(q *request) (*reply, *apiError) {
		b := s.state.buckets[name]
		if b == nil {
			return nil, errorf(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		}
		if b.account != q.account() {
			return nil, errorf(http.StatusForbidden, "AccessDenied", "Access Denied")
		}
		return h(q, b)
	}
}

func (s *Sim) createBucket(q *request, name string) (*reply, *apiError) {
	if !matches(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`, name) || strings.Contains(name, "..") {
		return nil, errorf(http.StatusBadRequest, "InvalidBucketName", "The specified bucket is not valid.")
	}
	var conf struct {
		LocationConstraint string `xml:"LocationConstraint"`
	}
	if len(bytes.TrimSpace(q.body)) > 0 {
		if err := xml.Unmarshal(q.body, &conf); err != nil {
			return nil, errorf(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
		}
	}
	switch {
	case conf.LocationConstraint == "" && q.region != "us-east-1":
		return nil, errorf(http.StatusBadRequest, "IllegalLocationConstraintException", "The unspecified location constraint is incompatible for the region specific endpoint this request was sent to.")
	case conf.LocationConstraint != "" && conf.LocationConstraint != q.region:
		return nil, errorf(http.StatusBadRequest, "IllegalLocationConstraintException", "The %s location constraint is incompatible for the region specific endpoint this request was sent to.", conf.LocationConstraint)
	}
	if b := s.state.buckets[name]; b != nil {
		if b.account == q.account() {
			return nil, errorf(http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
		}
		return nil, errorf(http.StatusConflict, "BucketAlreadyExists", "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
	}
	s.state.buckets[name] = &bucket{Name: name, created: s.now(), objects: map[string]*s3Object{}, account: q.account(), region: q.region}
	return &reply{header: map[string]string{"Location": "/" + name}}, nil
}

func (s *Sim) deleteBucket(_ *request, b *bucket) (*reply, *apiError) {
	if len(b.objects) > 0 {
		return nil, errorf(http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
	}
	delete(s.state.buckets, b.Name)
	return &reply{status: http.StatusNoContent}, nil
}

type s3Tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	TagSet  []xmlTag `xml:"TagSet>Tag"`
}

func (s *Sim) putBucketTagging(q *request, b *bucket) (*reply, *apiError) {
	var t s3Tagging
	if err := xml.Unmarshal(q.body, &t); err != nil {
		return nil, errorf(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
	}
	tags := map[string]string{}
	for _, tag := range t.TagSet {
		if tag.Key == "" {
			return nil, errorf(http.StatusBadRequest, "InvalidTag", "The TagKey you have provided is invalid")
		}
		if _, dup := tags[tag.Key]; dup {
			return nil, errorf(http.StatusBadRequest, "InvalidTag", "Cannot provide multiple Tags with the same key")
		}
		tags[tag.Key] = tag.Value
	}
	b.tags = tags
	return &reply{status: http.StatusNoContent}, nil
}

func (s *Sim) getBucketTagging(_ *request, b *bucket) (*reply, *apiError) {
	if len(b.tags) == 0 {
		return nil, errorf(http.StatusNotFound, "NoSuchTagSet", "The TagSet does not exist")
	}
	return &reply{body: s3Tagging{Xmlns: nsS3, TagSet: tagsXML(b.tags)}}, nil
}

func (s *Sim) listBuckets(q *request) (*reply, *apiError) {
	type entry struct {
		Name         string `xml:"Name"`
		CreationDate string `xml:"CreationDate"`
		BucketRegion string `xml:"BucketRegion"`
	}
	var list []entry
	for _, b := range s.state.buckets {
		if b.account == q.account() {
			list = append(list, entry{b.Name, b.created.Format(time.RFC3339), b.region})
		}
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	return &reply{body: struct {
		XMLName xml.Name `xml:"ListAllMyBucketsResult"`
		Xmlns   string   `xml:"xmlns,attr"`
		OwnerID string   `xml:"Owner>ID"`
		Buckets []entry  `xml:"Buckets>Bucket"`
	}{Xmlns: nsS3, OwnerID: q.account(), Buckets: list}}, nil
}

func (s *Sim) listObjects(q *request, b *bucket) (*reply, *apiError) {
	type content struct {
		Key          string `xml:"Key"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int    `xml:"Size"`
		StorageClass string `xml:"StorageClass"`
	}
	prefix := q.r.URL.Query().Get("prefix")
	var list []content
	for _, k := range slices.Sorted(maps.Keys(b.objects)) {
		if o := b.objects[k]; strings.HasPrefix(k, prefix) {
			list = append(list, content{k, o.modified.Format(time.RFC3339), o.etag, len(o.data), "STANDARD"})
		}
	}
	return &reply{body: struct {
		XMLName     xml.Name  `xml:"ListBucketResult"`
		Xmlns       string    `xml:"xmlns,attr"`
		Name        string    `xml:"Name"`
		Prefix      string    `xml:"Prefix"`
		KeyCount    int       `xml:"KeyCount"`
		MaxKeys     int       `xml:"MaxKeys"`
		IsTruncated bool      `xml:"IsTruncated"`
		Contents    []content `xml:"Contents"`
	}{Xmlns: nsS3, Name: b.Name, Prefix: prefix, KeyCount: len(list), MaxKeys: 1000, Contents: list}}, nil
}

func (s *Sim) putObject(q *request, b *bucket, key string) (*reply, *apiError) {
	data := q.body
	if strings.Contains(q.r.Header.Get("Content-Encoding"), "aws-chunked") || strings.HasPrefix(q.r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		var err error
		if data, err = decodeAWSChunked(q.body); err != nil {
			return nil, errorf(http.StatusBadRequest, "IncompleteBody", "aws-chunked body: %v", err)
		}
	}
	sum := md5.Sum(data)
	o := &s3Object{data: bytes.Clone(data), etag: `"` + hex.EncodeToString(sum[:]) + `"`, modified: s.now(), ctype: q.r.Header.Get("Content-Type")}
	b.objects[key] = o
	return &reply{header: map[string]string{"ETag": o.etag}}, nil
}

func (s *Sim) getObject(q *request, b *bucket, key string) (*reply, *apiError) {
	o := b.objects[key]
	if o == nil {
		return nil, errorf(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
	}
	h := map[string]string{"ETag": o.etag, "Content-Length": strconv.Itoa(len(o.data)), "Last-Modified": o.modified.Format(http.TimeFormat)}
	if o.ctype != "" {
		h["Content-Type"] = o.ctype
	}
	return &reply{header: h, body: rawBody(o.data)}, nil
}

// rawBody is a REST-XML reply body written as it is.
type rawBody []byte

// decodeAWSChunked reads an aws-chunked body: hex-size[;ext]\r\n data \r\n
// ..., ending with a zero-size chunk and optional trailers.
func decodeAWSChunked(body []byte) ([]byte, error) {
	r := bufio.NewReader(bytes.NewReader(body))
	var out []byte
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(r, chunk); err != nil {
			return nil, err
		}
		out = append(out, chunk...)
		if _, err := r.ReadString('\n'); err != nil {
			return nil, err
		}
	}
}
