package recall

import (
	"context"
	"encoding/binary"
	"math"

	"lukechampine.com/blake3"
)

// DenseDim is the dimension of the hashed dense vectors.
const DenseDim = 256

// trigramWeight is the weight of one character trigram relative to the
// whole stem in a term's hashed features.
const trigramWeight = 0.5

// Embedder turns texts into vectors, for example through an
// OpenAI-compatible embeddings endpoint. The index never calls it; the
// caller embeds documents and queries and passes Doc.Vector and
// Options.QueryVector, so an endpoint failure only means falling back to the
// local hashed signal.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// termFeatures hashes a stem and its character trigrams (with word
// boundaries) into signed dimensions: feature f >= 0 adds to dimension f,
// f < 0 subtracts from dimension -f-1. The first feature is the stem itself.
func termFeatures(stem string) []int32 {
	feat := []int32{hashFeature("w\x00" + stem)}
	s := "#" + stem + "#"
	for i := 0; i+3 <= len(s); i++ {
		feat = append(feat, hashFeature("g\x00"+s[i:i+3]))
	}
	return feat
}

func hashFeature(s string) int32 {
	sum := blake3.Sum256([]byte(s))
	v := binary.LittleEndian.Uint32(sum[:4])
	dim := int32(v % DenseDim)
	if v&(1<<31) != 0 {
		return -dim - 1
	}
	return dim
}

// addFeatures adds w times the term's feature vector to vec.
func addFeatures(vec []float32, feat []int32, w float32) {
	for i, f := range feat {
		fw := w
		if i > 0 {
			fw *= trigramWeight
		}
		if f >= 0 {
			vec[f] += fw
		} else {
			vec[-f-1] -= fw
		}
	}
}

// termVector fills vec with the hashed vector of weighted terms, where each
// term weighs (1 + ln tf) * idf * weight.
func (ix *Index) denseOf(vec []float32, terms []termFreq, qweights map[uint32]float64) {
	clear(vec)
	for _, tf := range terms {
		df := ix.post[tf.term].df()
		if df == 0 {
			continue
		}
		w := (1 + math.Log(float64(tf.tf))) * ix.idf(df)
		if qweights != nil {
			w *= qweights[tf.term]
		}
		addFeatures(vec, ix.termFeat[tf.term], float32(w))
	}
}

// cosine returns the cosine similarity of two vectors of equal length, 0 if
// either is zero or the lengths differ.
func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
